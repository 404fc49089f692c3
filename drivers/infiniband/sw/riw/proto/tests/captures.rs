// SPDX-License-Identifier: GPL-2.0

//! Decodes recorded siw/riw traffic in `testdata/*.pcap` (and `*.pcapng`):
//! reassembles each TCP direction by sequence number, runs the MPA frame
//! parser on both (request from the client, reply from the server), learns
//! CRC and revision from them, and runs the FPDU stream parser over the rest,
//! requiring zero errors. Retransmitted and overlapping segments are merged;
//! a capture that ends mid-FPDU, or loses a segment, stops that stream
//! cleanly at the last contiguous byte. TCP connections that do not start
//! with an MPA request (e.g. perftest's out-of-band exchange over TCP) are
//! skipped.
//!
//! The captures are recorded by `testdata/capture.sh`. Each is named
//! `TOOL-crc` or `TOOL-nocrc` and must also show what its name promises:
//! every MPA connection negotiated (request and reply, accepted by our own
//! initiator and responder logic) with CRCs on or off as named, both
//! directions decoded whole, FPDUs in both directions, the opcodes the tool
//! produces and, for `rping-p2p`, peer-to-peer mode with the zero-length
//! ready-to-receive message first.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use riw_proto::mpa::MPA_KEY_REQUEST;
use riw_proto::*;

/// One TCP segment's payload as captured.
struct Segment {
    seq: u32,
    data: Vec<u8>,
    /// The capture cut the packet short: bytes after `data` are missing.
    truncated: bool,
}

#[derive(Default)]
struct Direction {
    syn_seq: Option<u32>,
    segments: Vec<Segment>,
}

type Endpoint = (Vec<u8>, u16);
type FlowKey = (Endpoint, Endpoint);

#[derive(Default)]
struct Capture {
    /// Directions keyed by (source, destination), in order of first sight.
    flows: BTreeMap<FlowKey, Direction>,
    order: Vec<FlowKey>,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl Capture {
    /// Adds a link-layer frame; `cut` tells that the capture truncated it.
    fn add_frame(&mut self, linktype: u32, frame: &[u8], cut: bool) {
        let (ethertype, l3) = match linktype {
            // Ethernet, with any number of VLAN tags.
            1 => {
                let mut at = 12;
                let mut et = be16(frame, at);
                while matches!(et, Some(0x8100 | 0x88a8)) {
                    at += 4;
                    et = be16(frame, at);
                }
                (et, frame.get(at + 2..))
            }
            // Linux cooked capture v1 and v2.
            113 => (be16(frame, 14), frame.get(16..)),
            276 => (be16(frame, 0), frame.get(20..)),
            // Raw IP.
            101 | 12 | 228 | 229 => (None, Some(frame)),
            _ => return,
        };
        let Some(l3) = l3 else { return };
        let version = l3.first().map(|b| b >> 4);
        match (ethertype, version) {
            (Some(0x0800) | None, Some(4)) => self.add_ipv4(l3, cut),
            (Some(0x86dd) | None, Some(6)) => self.add_ipv6(l3, cut),
            _ => {}
        }
    }

    fn add_ipv4(&mut self, ip: &[u8], cut: bool) {
        let ihl = usize::from(ip[0] & 0xf) * 4;
        let (Some(total), Some(frag)) = (be16(ip, 2), be16(ip, 6)) else {
            return;
        };
        // Skip fragments (never seen on veth, and unreassemblable here).
        if ip.get(9) != Some(&6) || frag & 0x3fff != 0 {
            return;
        }
        let end = usize::from(total).min(ip.len());
        let cut = cut || usize::from(total) > ip.len();
        let (Some(src), Some(dst), Some(tcp)) = (ip.get(12..16), ip.get(16..20), ip.get(ihl..end))
        else {
            return;
        };
        self.add_tcp(src, dst, tcp, cut);
    }

    fn add_ipv6(&mut self, ip: &[u8], cut: bool) {
        let Some(plen) = be16(ip, 4) else { return };
        let mut next = ip.get(6).copied();
        let mut at = 40;
        // Hop-by-hop, routing and destination options headers.
        while matches!(next, Some(0 | 43 | 60)) {
            next = ip.get(at).copied();
            at += (usize::from(ip.get(at + 1).copied().unwrap_or(0)) + 1) * 8;
        }
        let end = (40 + usize::from(plen)).min(ip.len());
        let cut = cut || 40 + usize::from(plen) > ip.len();
        let (Some(src), Some(dst), Some(tcp)) = (ip.get(8..24), ip.get(24..40), ip.get(at..end))
        else {
            return;
        };
        if next == Some(6) {
            self.add_tcp(src, dst, tcp, cut);
        }
    }

    fn add_tcp(&mut self, src: &[u8], dst: &[u8], tcp: &[u8], cut: bool) {
        let (Some(sport), Some(dport), Some(seq)) = (be16(tcp, 0), be16(tcp, 2), be32(tcp, 4))
        else {
            return;
        };
        let (Some(&off), Some(&flags)) = (tcp.get(12), tcp.get(13)) else {
            return;
        };
        let key = ((src.to_vec(), sport), (dst.to_vec(), dport));
        if !self.flows.contains_key(&key) {
            self.order.push(key.clone());
        }
        let dir = self.flows.entry(key).or_default();
        if flags & 0x02 != 0 {
            dir.syn_seq = Some(seq);
        }
        let data = tcp.get(usize::from(off >> 4) * 4..).unwrap_or(&[]);
        if !data.is_empty() || cut {
            dir.segments.push(Segment {
                seq,
                data: data.to_vec(),
                truncated: cut,
            });
        }
    }
}

impl Direction {
    /// The contiguous byte stream from the first byte after SYN (or from the
    /// first data segment), up to the first hole or truncation.
    fn stream(&self) -> (Vec<u8>, bool) {
        let Some(base) = self
            .syn_seq
            .map(|s| s.wrapping_add(1))
            .or_else(|| self.segments.first().map(|s| s.seq))
        else {
            return (Vec::new(), true);
        };
        let mut segs: Vec<(u32, &Segment)> = self
            .segments
            .iter()
            .map(|s| (s.seq.wrapping_sub(base), s))
            .filter(|(rel, _)| *rel < 1 << 31)
            .collect();
        segs.sort_by_key(|(rel, s)| (*rel, std::cmp::Reverse(s.data.len())));
        let mut out = Vec::new();
        for (rel, seg) in segs {
            let rel = rel as usize;
            if rel > out.len() {
                return (out, false); // lost segment
            }
            let end = rel + seg.data.len();
            if end > out.len() {
                out.extend_from_slice(&seg.data[out.len() - rel..]);
            }
            if seg.truncated && end >= out.len() {
                return (out, false);
            }
        }
        (out, true)
    }
}

fn endian_u32(bytes: &[u8], at: usize, le: bool) -> Option<u32> {
    let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    Some(if le {
        u32::from_le_bytes(b)
    } else {
        u32::from_be_bytes(b)
    })
}

fn read_pcap(bytes: &[u8]) -> Result<Capture, String> {
    let mut cap = Capture::default();
    let magic = bytes.get(..4).ok_or("file too short")?;
    if magic == [0x0a, 0x0d, 0x0d, 0x0a] {
        return read_pcapng(bytes);
    }
    let le = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => return Err("not a pcap file".into()),
    };
    let u32_at = |at: usize| endian_u32(bytes, at, le);
    let linktype = u32_at(20).ok_or("short header")? & 0x0fff_ffff;
    let mut at = 24;
    while let (Some(incl), Some(orig)) = (u32_at(at + 8), u32_at(at + 12)) {
        let start = at + 16;
        let Some(frame) = bytes.get(start..start + incl as usize) else {
            break; // capture file itself cut short
        };
        cap.add_frame(linktype, frame, incl < orig);
        at = start + incl as usize;
    }
    Ok(cap)
}

fn read_pcapng(bytes: &[u8]) -> Result<Capture, String> {
    let mut cap = Capture::default();
    let mut le = true;
    let mut linktypes = Vec::new();
    let mut at = 0;
    while let Some(kind) = bytes.get(at..at + 4) {
        if kind == [0x0a, 0x0d, 0x0d, 0x0a] {
            le = bytes.get(at + 8..at + 12) == Some(&[0x4d, 0x3c, 0x2b, 0x1a]);
            linktypes.clear();
        }
        let (Some(kind), Some(len)) = (endian_u32(bytes, at, le), endian_u32(bytes, at + 4, le))
        else {
            break;
        };
        let body = bytes
            .get(at + 8..at + len as usize)
            .ok_or("truncated block")?;
        let field = |off: usize| endian_u32(body, off, le);
        match kind {
            1 => {
                let lt = body.get(..2).ok_or("short IDB")?;
                let lt = if le {
                    u16::from_le_bytes([lt[0], lt[1]])
                } else {
                    u16::from_be_bytes([lt[0], lt[1]])
                };
                linktypes.push(u32::from(lt));
            }
            6 => {
                let (Some(iface), Some(incl), Some(orig)) = (field(0), field(12), field(16)) else {
                    return Err("short EPB".into());
                };
                let frame = body.get(20..20 + incl as usize).ok_or("short EPB data")?;
                let lt = *linktypes.get(iface as usize).ok_or("EPB before IDB")?;
                cap.add_frame(lt, frame, incl < orig);
            }
            _ => {}
        }
        if len < 12 {
            return Err("bad block length".into());
        }
        at += len as usize;
    }
    Ok(cap)
}

/// Per-stream summary, printed for the record.
#[derive(Default, Debug)]
struct Summary {
    /// FPDUs by opcode.
    fpdus: BTreeMap<String, usize>,
    payload: usize,
    ended_mid_fpdu: bool,
    /// The capture holds the direction whole: no lost or truncated segment.
    contiguous: bool,
    /// The first FPDU's opcode and payload length.
    first: Option<(Opcode, u16)>,
}

impl Summary {
    fn count(&self) -> usize {
        self.fpdus.values().sum()
    }
}

/// Parses the FPDU stream in `bytes`, in chunks of `chunk` bytes.
fn parse_fpdus(bytes: &[u8], crc: bool, chunk: usize) -> Result<Summary, (Error, usize)> {
    let mut parser = StreamParser::<SoftCrc32c>::new(RxConfig {
        crc,
        max_ulpdu: u16::MAX,
    });
    let mut summary = Summary::default();
    let mut at = 0;
    for piece in bytes.chunks(chunk) {
        let mut rest = piece;
        while !rest.is_empty() {
            let step = parser.poll(rest).map_err(|e| (e, at))?;
            at += step.consumed;
            rest = &rest[step.consumed..];
            let (header, data) = match step.event {
                Some(RxEvent::Header(h)) => (Some(h), &[][..]),
                Some(RxEvent::Whole { header, data }) => (Some(header), data),
                Some(RxEvent::Payload { data, .. }) => (None, data),
                Some(RxEvent::End) | None => (None, &[][..]),
            };
            if let Some(h) = header {
                summary
                    .first
                    .get_or_insert((h.segment.opcode, h.payload_len));
                *summary
                    .fpdus
                    .entry(format!("{:?}", h.segment.opcode))
                    .or_default() += 1;
            }
            summary.payload += data.len();
        }
    }
    summary.ended_mid_fpdu = !parser.at_boundary();
    Ok(summary)
}

/// Parses an MPA frame of `kind` at the start of `bytes` incrementally.
fn parse_mpa(
    bytes: &[u8],
    kind: FrameKind,
) -> Result<Option<(MpaFrame<'static>, Vec<u8>, usize)>, Error> {
    let mut parser = MpaFrameParser::new(kind);
    let mut consumed = 0;
    for piece in bytes.chunks(7) {
        consumed += parser.feed(piece)?.consumed;
        if parser.is_complete() {
            break;
        }
    }
    let Some(frame) = parser.frame() else {
        return Ok(None);
    };
    let pd = frame.private_data.to_vec();
    let frame = MpaFrame {
        private_data: &[],
        ..frame
    };
    Ok(Some((frame, pd, consumed)))
}

/// One MPA connection found in a capture.
#[derive(Debug)]
struct Connection {
    /// "client address:port -> server address:port".
    name: String,
    outcome: Outcome,
}

#[derive(Debug)]
enum Outcome {
    /// The capture ends before the request or reply is complete.
    Incomplete(&'static str),
    /// The responder rejected the connection.
    Rejected,
    /// Both frames parsed and both FPDU streams decoded without an error.
    Decoded(Box<Decoded>),
}

#[derive(Debug)]
struct Decoded {
    request: MpaFrame<'static>,
    reply: MpaFrame<'static>,
    /// What our initiator logic settles on given siw's request and reply.
    settled: Negotiated,
    client: Summary,
    server: Summary,
}

impl Connection {
    fn line(&self) -> String {
        let d = match &self.outcome {
            Outcome::Incomplete(what) => return format!("{}: capture ends {what}", self.name),
            Outcome::Rejected => return format!("{}: connection rejected", self.name),
            Outcome::Decoded(d) => d,
        };
        let mut line = format!(
            "{}: MPA rev {:?}, crc {}, request {:?}, reply {:?}",
            self.name, d.settled.revision, d.settled.crc, d.request.enhanced, d.reply.enhanced
        );
        for (side, s) in [("client", &d.client), ("server", &d.server)] {
            line += &format!(
                "; {side}: {:?}, {} payload bytes{}{}",
                s.fpdus,
                s.payload,
                if s.ended_mid_fpdu {
                    ", capture ends mid-FPDU"
                } else {
                    ""
                },
                if s.contiguous { "" } else { ", stream cut" }
            );
        }
        line
    }
}

/// The local settings an initiator must have had to send `request`.
fn initiator_config(request: &MpaFrame<'_>) -> MpaConfig {
    let e = request.enhanced;
    MpaConfig {
        revision: request.revision,
        crc: request.crc,
        ird: e.map_or(0, |e| e.ird),
        ird_max: e.map_or(0, |e| e.ird),
        ord: e.map_or(0, |e| e.ord),
        peer_to_peer: e.is_some_and(|e| e.peer_to_peer),
        rtr: e.map_or(RtrModes::NONE, |e| e.rtr),
        large_fpdus: request.large_fpdus,
    }
}

/// Decodes every MPA connection in a capture; returns them or the first
/// failure.
fn check_capture(bytes: &[u8]) -> Result<Vec<Connection>, String> {
    let cap = read_pcap(bytes)?;
    let mut conns = Vec::new();
    let mut seen = Vec::new();
    for key in &cap.order {
        let reverse = (key.1.clone(), key.0.clone());
        if seen.contains(&reverse) {
            continue;
        }
        seen.push(key.clone());
        let (here, here_whole) = cap.flows[key].stream();
        let (there, there_whole) = cap
            .flows
            .get(&reverse)
            .map(|d| d.stream())
            .unwrap_or_default();
        // The client is the side whose stream starts with the request key.
        let (client_key, (client, client_whole), (server, server_whole)) =
            if here.starts_with(&MPA_KEY_REQUEST) {
                (key, (here, here_whole), (there, there_whole))
            } else if there.starts_with(&MPA_KEY_REQUEST) {
                (&reverse, (there, there_whole), (here, here_whole))
            } else {
                continue;
            };
        let ip = |a: &[u8]| {
            a.iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(".")
        };
        let name = format!(
            "{}:{} -> {}:{}",
            ip(&client_key.0 .0),
            client_key.0 .1,
            ip(&client_key.1 .0),
            client_key.1 .1
        );
        let mut conn = Connection {
            name: name.clone(),
            outcome: Outcome::Rejected,
        };
        let request =
            parse_mpa(&client, FrameKind::Request).map_err(|e| format!("{name}: request: {e}"))?;
        let Some((request, _, req_len)) = request else {
            conn.outcome = Outcome::Incomplete("inside the MPA request");
            conns.push(conn);
            continue;
        };
        let reply =
            parse_mpa(&server, FrameKind::Reply).map_err(|e| format!("{name}: reply: {e}"))?;
        let Some((reply, _, rep_len)) = reply else {
            conn.outcome = Outcome::Incomplete("before the MPA reply is complete");
            conns.push(conn);
            continue;
        };
        if reply.reject {
            conns.push(conn);
            continue;
        }
        // Our initiator must accept what the peer replied, and our responder
        // what the peer requested, with the same outcome.
        let settled = initiator_config(&request)
            .complete(&reply)
            .map_err(|e| format!("{name}: reply {reply:?} to request {request:?}: {e}"))?;
        let responder = MpaConfig {
            crc: reply.crc,
            ..initiator_config(&reply)
        };
        let (_, theirs) = responder
            .respond(&request, &[])
            .map_err(|e| format!("{name}: request {request:?}: {e}"))?;
        if (theirs.crc, theirs.revision, theirs.rtr) != (settled.crc, settled.revision, settled.rtr)
        {
            return Err(format!(
                "{name}: responder settles {theirs:?}, initiator {settled:?}"
            ));
        }
        let mut sides = Vec::new();
        for (side, stream, skip, whole) in [
            ("client", &client, req_len, client_whole),
            ("server", &server, rep_len, server_whole),
        ] {
            let mut summary =
                parse_fpdus(&stream[skip..], settled.crc, 1448).map_err(|(e, at)| {
                    format!("{name}: {side} stream at byte {}: {e} ({e:?})", skip + at)
                })?;
            summary.contiguous = whole;
            // Chunking must not matter on real traffic either.
            let bytewise = parse_fpdus(
                &stream[skip..stream.len().min(skip + 64 * 1024)],
                settled.crc,
                1,
            );
            if let Err((e, at)) = bytewise {
                return Err(format!("{name}: {side} byte-wise at {}: {e}", skip + at));
            }
            sides.push(summary);
        }
        let server_summary = sides.pop().unwrap_or_default();
        let client_summary = sides.pop().unwrap_or_default();
        conn.outcome = Outcome::Decoded(Box::new(Decoded {
            request,
            reply,
            settled,
            client: client_summary,
            server: server_summary,
        }));
        conns.push(conn);
    }
    Ok(conns)
}

fn capture_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| {
        matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("pcap" | "pcapng")
        )
    });
    files.sort();
    files
}

/// What a recorded capture must show beyond decoding without an error.
struct Expect {
    /// CRCs on, in request, reply and the settled parameters.
    crc: bool,
    /// Opcodes the traffic must contain.
    opcodes: &'static [&'static str],
    /// MPA peer-to-peer mode: the request offers ready-to-receive modes, the
    /// reply picks one and the client's first FPDU is that zero-length
    /// message.
    p2p: bool,
}

/// The expectations from a capture's file name, `TOOL-crc` or `TOOL-nocrc`.
fn expectations(file: &Path) -> Result<Expect, String> {
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let (tool, crc) = stem
        .rsplit_once('-')
        .ok_or("name is not TOOL-crc or TOOL-nocrc")?;
    let crc = match crc {
        "crc" => true,
        "nocrc" => false,
        _ => return Err("name does not end in -crc or -nocrc".into()),
    };
    // rping, each ping: the client advertises its buffer in a Send, the
    // server RDMA Reads it and Sends, the client advertises again, the server
    // RDMA Writes back and Sends. perftest: Sends carry the out-of-band
    // exchange, then the RDMA Writes of the test.
    let rping: &[&str] = &["Send", "ReadRequest", "ReadResponse", "RdmaWrite"];
    let (opcodes, p2p) = match tool {
        "rping" => (rping, false),
        "rping-p2p" => (rping, true),
        "write_bw" => (&["Send", "RdmaWrite"][..], false),
        _ => return Err(format!("unknown tool {tool:?}")),
    };
    Ok(Expect { crc, opcodes, p2p })
}

/// Checks the peer-to-peer negotiation of a connection.
fn check_p2p(d: &Decoded) -> Result<(), String> {
    let (Some(req), Some(rep)) = (d.request.enhanced, d.reply.enhanced) else {
        return Err("no IRD/ORD words".into());
    };
    let Some(mode) = d.settled.rtr else {
        return Err("no ready-to-receive mode settled".into());
    };
    if !req.peer_to_peer || !rep.peer_to_peer || rep.rtr != RtrModes::only(mode) {
        return Err(format!("request {req:?} and reply {rep:?} disagree"));
    }
    let opcode = match mode {
        RtrMode::Write => Opcode::RdmaWrite,
        RtrMode::Read => Opcode::ReadRequest,
        RtrMode::Send => Opcode::Send,
    };
    // A zero-length Read Request asks for zero bytes; its ULPDU is all header.
    if d.client.first != Some((opcode, 0)) {
        return Err(format!(
            "client's first FPDU {:?} is not the zero-length {opcode:?}",
            d.client.first
        ));
    }
    Ok(())
}

/// Checks one recorded capture against its name; returns its report lines.
fn check_recorded(file: &Path) -> Result<Vec<String>, String> {
    let expect = expectations(file)?;
    let bytes = fs::read(file).map_err(|e| e.to_string())?;
    let conns = check_capture(&bytes)?;
    if conns.is_empty() {
        return Err("no MPA connection".into());
    }
    let mut seen = BTreeMap::<String, usize>::new();
    let (mut from_client, mut from_server) = (0, 0);
    for conn in &conns {
        let Outcome::Decoded(d) = &conn.outcome else {
            return Err(conn.line());
        };
        // Negotiated on both directions, CRC as the file name says.
        let crc = expect.crc;
        if (d.request.crc, d.reply.crc, d.settled.crc) != (crc, crc, crc) {
            return Err(format!("{}: CRC is not {crc} throughout", conn.line()));
        }
        if expect.p2p {
            check_p2p(d).map_err(|e| format!("{}: {e}", conn.line()))?;
        } else if d.settled.rtr.is_some() {
            return Err(format!("{}: unexpected peer-to-peer mode", conn.line()));
        }
        for (side, s) in [("client", &d.client), ("server", &d.server)] {
            if !s.contiguous || s.ended_mid_fpdu {
                return Err(format!("{}: {side} stream not decoded whole", conn.line()));
            }
            for (op, n) in &s.fpdus {
                *seen.entry(op.clone()).or_default() += n;
            }
        }
        from_client += d.client.count();
        from_server += d.server.count();
    }
    if from_client == 0 || from_server == 0 {
        return Err(format!(
            "{from_client} FPDUs from the client, {from_server} from the server"
        ));
    }
    for op in expect.opcodes {
        if !seen.contains_key(*op) {
            return Err(format!("no {op} FPDU in {seen:?}"));
        }
    }
    Ok(conns.iter().map(Connection::line).collect())
}

#[test]
fn recorded_captures_decode_without_errors() {
    let files = capture_files();
    assert!(
        !files.is_empty(),
        "no captures in testdata/: record them with testdata/capture.sh"
    );
    let mut failures = Vec::new();
    for file in files {
        match check_recorded(&file) {
            Ok(lines) => lines
                .iter()
                .for_each(|l| println!("{}: {l}", file.display())),
            Err(e) => failures.push(format!("{}: {e}", file.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// The reader itself, on a synthetic capture with retransmission, reordering
// and a capture cut short mid-FPDU.
mod synthetic {
    use super::*;

    fn tcp_packet(
        src: [u8; 4],
        dst: [u8; 4],
        ports: (u16, u16),
        seq: u32,
        flags: u8,
        data: &[u8],
    ) -> Vec<u8> {
        let mut p = vec![0u8; 14];
        p[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let total = (20 + 20 + data.len()) as u16;
        p.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0]);
        p[16..18].copy_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&ports.0.to_be_bytes());
        p.extend_from_slice(&ports.1.to_be_bytes());
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        p.extend_from_slice(data);
        p
    }

    fn pcap(packets: &[(Vec<u8>, usize)]) -> Vec<u8> {
        let mut f = vec![
            0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0,
            0,
        ];
        for (p, keep) in packets {
            let keep = (*keep).min(p.len());
            f.extend_from_slice(&[0; 8]);
            f.extend_from_slice(&(keep as u32).to_le_bytes());
            f.extend_from_slice(&(p.len() as u32).to_le_bytes());
            f.extend_from_slice(&p[..keep]);
        }
        f
    }

    /// The same packets as a little-endian pcapng file.
    fn pcapng(packets: &[(Vec<u8>, usize)]) -> Vec<u8> {
        fn block(kind: u32, body: &[u8]) -> Vec<u8> {
            let len = (12 + body.len().div_ceil(4) * 4) as u32;
            let mut b = kind.to_le_bytes().to_vec();
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(body);
            b.resize(len as usize - 4, 0);
            b.extend_from_slice(&len.to_le_bytes());
            b
        }
        let mut f = block(
            0x0a0d_0d0a,
            &[
                0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        );
        f.extend(block(1, &[1, 0, 0, 0, 0, 0, 0, 0]));
        for (p, keep) in packets {
            let keep = (*keep).min(p.len());
            let mut body = vec![0u8; 12];
            body.extend_from_slice(&(keep as u32).to_le_bytes());
            body.extend_from_slice(&(p.len() as u32).to_le_bytes());
            body.extend_from_slice(&p[..keep]);
            f.extend(block(6, &body));
        }
        f
    }

    fn send(msn: u32, payload: &[u8]) -> Vec<u8> {
        let header = FpduHeader::new(SegmentHeader {
            opcode: Opcode::Send,
            last: true,
            placement: Placement::Untagged {
                inval_stag: 0,
                queue: 0,
                msn,
                mo: 0,
            },
        });
        let mut out = vec![0u8; 4096];
        let n = encode_fpdu::<SoftCrc32c>(&header, payload, true, &mut out).unwrap();
        out.truncate(n);
        out
    }

    #[test]
    fn reassembles_and_decodes() {
        let (c, s) = ([192, 0, 2, 1], [192, 0, 2, 2]);
        let (cp, sp) = ((40000, 4791), (4791, 40000));
        let cfg = MpaConfig {
            revision: MpaRevision::V2,
            crc: true,
            ird: 4,
            ird_max: 4,
            ord: 4,
            peer_to_peer: false,
            rtr: RtrModes::ALL,
            large_fpdus: false,
        };
        let mut req = vec![0u8; 600];
        let n = cfg.request(b"rping").encode(&mut req).unwrap();
        req.truncate(n);
        let (request, _) = MpaFrame::decode(&req, FrameKind::Request).unwrap();
        let (reply, _) = cfg.respond(&request, &[]).unwrap();
        let mut rep = vec![0u8; 600];
        let n = reply.encode(&mut rep).unwrap();
        rep.truncate(n);

        let mut client = req.clone();
        for msn in 1..=5 {
            client.extend(send(msn, &vec![msn as u8; 700]));
        }
        let mut server = rep.clone();
        server.extend(send(1, b"ack"));
        let (cisn, sisn) = (1000u32, u32::MAX - 10); // server's sequence wraps
        let mut pkts = vec![
            (tcp_packet(c, s, cp, cisn, 0x02, &[]), usize::MAX),
            (tcp_packet(s, c, sp, sisn, 0x12, &[]), usize::MAX),
        ];
        let segs: Vec<(u32, &[u8])> = client
            .chunks(500)
            .scan(0u32, |off, ch| {
                let o = *off;
                *off += ch.len() as u32;
                Some((o, ch))
            })
            .collect();
        // In order, then a retransmission of segment 2 and a swap of 4 and 5.
        let last = segs.len() - 1;
        assert!(last > 5);
        for i in [0, 1, 2, 1, 4, 3].into_iter().chain(5..last) {
            let (off, data) = segs[i];
            pkts.push((tcp_packet(c, s, cp, cisn + 1 + off, 0x18, data), usize::MAX));
        }
        pkts.push((
            tcp_packet(s, c, sp, sisn.wrapping_add(1), 0x18, &server),
            usize::MAX,
        ));
        // The last client segment is cut by the snap length.
        let (off, data) = segs[last];
        pkts.push((tcp_packet(c, s, cp, cisn + 1 + off, 0x18, data), 54 + 10));
        let lines = |bytes: &[u8]| -> Vec<String> {
            check_capture(bytes)
                .unwrap()
                .iter()
                .map(Connection::line)
                .collect()
        };
        let report = lines(&pcap(&pkts));
        assert_eq!(lines(&pcapng(&pkts)), report);
        assert_eq!(report.len(), 1, "{report:?}");
        assert!(report[0].contains("crc true"), "{}", report[0]);
        assert!(report[0].contains("capture ends mid-FPDU"), "{}", report[0]);
        assert!(report[0].contains("server: {\"Send\": 1}"), "{}", report[0]);
        let conns = check_capture(&pcap(&pkts)).unwrap();
        let Outcome::Decoded(d) = &conns[0].outcome else {
            panic!("{}", conns[0].line());
        };
        // The fifth Send's header made it into the capture, its end did not.
        assert_eq!((d.client.count(), d.server.count()), (5, 1));
        assert!(!d.client.contiguous && d.server.contiguous);

        // A corrupted FPDU is reported.
        let mut bad = pkts.clone();
        let at = 2; // first client data segment, inside the first Send
        let n = bad[at].0.len();
        bad[at].0[n - 2] ^= 1;
        let err = check_capture(&pcap(&bad)).unwrap_err();
        assert!(err.contains("CRC"), "{err}");
    }
}
