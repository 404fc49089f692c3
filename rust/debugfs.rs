// SPDX-License-Identifier: GPL-2.0

//! debugfs: directories removed when dropped, holding read-only files whose contents a
//! show function formats on each read (`single_open` sequential files).
//!
//! A file's data belongs to its directory: dropping the directory removes it from debugfs
//! first, which waits for reads in progress and fails later ones, and only then drops the
//! data. debugfs may be absent (not built, or not allowed): a directory that cannot be
//! created is an error its owner may ignore.

use super::bindings;
use core::ffi::{c_int, c_void};
use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::error::from_err_ptr;
use kernel::prelude::*;

/// Read-only for its owner (root): what these files show is for the administrator.
const MODE_READ_OWNER: bindings::umode_t = 0o400;

/// What a file shows: formatted anew on each read, from the start.
pub trait Show: Send + Sync {
    /// Writes the file's contents to `out`. An error means `out` is full: the read is
    /// retried with a larger buffer.
    fn show(&self, out: &mut SeqFile<'_>) -> fmt::Result;
}

/// The output of a read: a `struct seq_file`, written to as a formatter.
pub struct SeqFile<'a> {
    m: NonNull<bindings::seq_file>,
    _borrow: PhantomData<&'a mut bindings::seq_file>,
}

impl fmt::Write for SeqFile<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // SAFETY: `m` is the seq_file of the read in progress (see `show_callback`); it
        // copies `s`, dropping it and marking itself overflowed if it is full.
        let ret = unsafe { bindings::seq_write(self.m.as_ptr(), s.as_ptr().cast(), s.len()) };
        if ret != 0 {
            return Err(fmt::Error);
        }
        Ok(())
    }
}

/// A file's data, behind the show function that reads it: `repr(C)` so that the show
/// function is found at the start whatever `D` is.
#[repr(C)]
struct Node<D> {
    show: unsafe fn(*const c_void, &mut SeqFile<'_>) -> fmt::Result,
    data: D,
}

/// Shows the data of a `Node<D>`.
///
/// # Safety
///
/// `node` points at a live `Node<D>`.
unsafe fn show_node<D: Show>(node: *const c_void, out: &mut SeqFile<'_>) -> fmt::Result {
    // SAFETY: Per the function's safety requirements.
    let node = unsafe { &*node.cast::<Node<D>>() };
    node.data.show(out)
}

/// The `show` of the sequential file: calls the node's show function.
unsafe extern "C" fn show_callback(m: *mut bindings::seq_file, _v: *mut c_void) -> c_int {
    // SAFETY: `single_open` stored the node (the inode's private data) in `m->private`;
    // the read runs under debugfs' protection of the file, so the directory that owns the
    // node has not finished removing it (see `Dir::drop`).
    let (node, m) = unsafe { ((*m).private as *const c_void, NonNull::new_unchecked(m)) };
    if node.is_null() {
        return 0;
    }
    let mut out = SeqFile {
        m,
        _borrow: PhantomData,
    };
    // SAFETY: Every node starts with its show function (`repr(C)`), which matches its data.
    // An error means the buffer is full, which the seq_file code sees and handles itself.
    let _ = unsafe { ((*node.cast::<Node<()>>()).show)(node, &mut out) };
    0
}

/// The `open` of the file: a sequential file over the node.
unsafe extern "C" fn open_callback(
    inode: *mut bindings::inode,
    file: *mut bindings::file,
) -> c_int {
    // SAFETY: debugfs calls `open` with the file's live inode, whose private data is the
    // node given at creation.
    unsafe { bindings::single_open(file, Some(show_callback), (*inode).i_private) }
}

/// The file operations of every file here, `owner` keeping the module while a file is
/// open.
struct ShowOps(bindings::file_operations);

// SAFETY: Immutable; the pointers are functions and this module.
unsafe impl Sync for ShowOps {}

static SHOW_OPS: ShowOps = ShowOps(bindings::file_operations {
    owner: crate::THIS_MODULE.as_ptr().cast(),
    open: Some(open_callback),
    read: Some(bindings::seq_read),
    llseek: Some(bindings::seq_lseek),
    release: Some(bindings::single_release),
    // SAFETY: The other operations are optional: absent (NULL) in a zeroed table.
    ..unsafe { core::mem::zeroed() }
});

/// Drops the node a file was created with.
struct Owned {
    node: *mut c_void,
    drop: unsafe fn(*mut c_void),
}

/// Frees a `Node<D>` from `KBox::into_raw`.
///
/// # Safety
///
/// `node` came from `KBox::<Node<D>>::into_raw` and is no longer used.
unsafe fn drop_node<D>(node: *mut c_void) {
    // SAFETY: Per the function's safety requirements.
    drop(unsafe { KBox::from_raw(node.cast::<Node<D>>()) });
}

/// A debugfs directory, removed with everything in it when dropped.
///
/// # Invariants
///
/// `dentry` is a directory this object created and has not removed; `nodes` hold the data
/// of the files in it (or in its subdirectories, whose own `Dir`s are dropped first).
pub struct Dir {
    dentry: NonNull<bindings::dentry>,
    nodes: KVec<Owned>,
}

// SAFETY: A dentry reference and owned nodes of `Send + Sync` data; debugfs locks itself.
unsafe impl Send for Dir {}
// SAFETY: As above; `&Dir` only reads the dentry pointer.
unsafe impl Sync for Dir {}

impl Dir {
    /// Creates directory `name` at the top of debugfs.
    pub fn new(name: &CStr) -> Result<Self> {
        Self::create(name, core::ptr::null_mut())
    }

    /// Creates directory `name` in `self`.
    ///
    /// # Safety
    ///
    /// The new directory is dropped before `self`, whose removal would free it.
    pub unsafe fn subdir(&self, name: &CStr) -> Result<Self> {
        Self::create(name, self.dentry.as_ptr())
    }

    fn create(name: &CStr, parent: *mut bindings::dentry) -> Result<Self> {
        // SAFETY: `name` is NUL-terminated; `parent` is NULL or a live directory of ours.
        let dentry = from_err_ptr(unsafe {
            bindings::riw_debugfs_create_dir(name.as_char_ptr().cast(), parent)
        })?;
        Ok(Self {
            dentry: NonNull::new(dentry).ok_or(ENOMEM)?,
            nodes: KVec::new(),
        })
    }

    /// Creates read-only file `name` showing `data`.
    pub fn file<D: Show + 'static>(&mut self, name: &CStr, data: D) -> Result {
        self.nodes.reserve(1, GFP_KERNEL)?;
        let node = KBox::into_raw(KBox::new(
            Node {
                show: show_node::<D>,
                data,
            },
            GFP_KERNEL,
        )?)
        .cast::<c_void>();
        // SAFETY: `name` is NUL-terminated, the directory live; the node stays until the
        // file is removed (see `Drop`), and `SHOW_OPS` is static.
        let created = from_err_ptr(unsafe {
            bindings::riw_debugfs_create_file(
                name.as_char_ptr().cast(),
                MODE_READ_OWNER,
                self.dentry.as_ptr(),
                node,
                &SHOW_OPS.0,
            )
        });
        // Reserved above: the push cannot fail. Kept even if the file was not created.
        let _ = self.nodes.push(
            Owned {
                node,
                drop: drop_node::<D>,
            },
            GFP_KERNEL,
        );
        created.map(|_| ())
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: Ours (type invariant). This removes the directory and its files, waits
        // for their reads in progress and makes later ones fail, so no show sees a node
        // after it.
        unsafe { bindings::riw_debugfs_remove(self.dentry.as_ptr()) };
        for owned in self.nodes.iter() {
            // SAFETY: Each node came from `KBox::into_raw` in `file`, and its file is gone.
            unsafe { (owned.drop)(owned.node) };
        }
    }
}
