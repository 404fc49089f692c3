// SPDX-License-Identifier: GPL-2.0

//! Bounds-checked big-endian cursors over caller-provided buffers.
//!
//! Every header codec goes through these two types, so no other code in the
//! protocol core indexes a slice with a wire-derived offset.

use super::Error;

/// Reads big-endian fields front to back; every read fails instead of
/// panicking when the buffer is short.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) const fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let (head, rest) = self.buf.split_first_chunk::<N>().ok_or(Error::Truncated)?;
        self.buf = rest;
        Ok(*head)
    }

    pub(crate) fn bytes(&mut self, len: usize) -> Result<&'a [u8], Error> {
        let (head, rest) = self.buf.split_at_checked(len).ok_or(Error::Truncated)?;
        self.buf = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Error> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    pub(crate) fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    pub(crate) const fn remaining(&self) -> &'a [u8] {
        self.buf
    }
}

/// Writes big-endian fields front to back into a caller buffer.
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    written: usize,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, written: 0 }
    }

    pub(crate) fn put(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let buf = core::mem::take(&mut self.buf);
        let (head, rest) = buf
            .split_at_mut_checked(bytes.len())
            .ok_or(Error::BufferTooSmall)?;
        head.copy_from_slice(bytes);
        self.buf = rest;
        // Cannot overflow: `written` never exceeds the original buffer length.
        self.written += bytes.len();
        Ok(())
    }

    pub(crate) fn u8(&mut self, v: u8) -> Result<(), Error> {
        self.put(&[v])
    }

    pub(crate) fn u16(&mut self, v: u16) -> Result<(), Error> {
        self.put(&v.to_be_bytes())
    }

    pub(crate) fn u32(&mut self, v: u32) -> Result<(), Error> {
        self.put(&v.to_be_bytes())
    }

    pub(crate) fn u64(&mut self, v: u64) -> Result<(), Error> {
        self.put(&v.to_be_bytes())
    }

    /// Bytes written so far.
    pub(crate) const fn written(&self) -> usize {
        self.written
    }
}
