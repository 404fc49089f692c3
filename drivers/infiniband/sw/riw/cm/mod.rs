// SPDX-License-Identifier: GPL-2.0

//! Connection management: listeners and connection endpoints over kernel TCP sockets, the
//! MPA exchange of the protocol core, and the events iw_cm expects.
//!
//! Each listener and endpoint is reference counted and runs as one work item on its
//! device's work queue: socket callbacks, timeouts and requests from the QP only note what
//! happened and schedule it, so the work never runs concurrently with itself and may
//! sleep. An endpoint goes through
//!
//! ```text
//!   active:   Connecting -> AwaitReply -> Established -> Closed
//!   passive:  AwaitRequest -> AwaitAccept -> Established -> Closed
//! ```
//!
//! and reports to iw_cm exactly what its rules allow: one ConnectReply for an active
//! endpoint; Established for an accepted one; then, for a connection that was up, an
//! optional Disconnect and one Close.
//!
//! `listener` takes connections, `mpa` holds one side of the MPA exchange, `endpoint` the
//! lifecycle of a connection up to the hand-over of its socket to `conn` and after.

mod endpoint;
mod listener;
mod mpa;

pub(crate) use endpoint::Endpoint;
pub(crate) use listener::Listener;
