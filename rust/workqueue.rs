// SPDX-License-Identifier: GPL-2.0

//! An owned work queue, delayed work items of reference-counted objects, completions and
//! jiffies: what an engine that runs in process context, woken by socket callbacks and
//! timeouts, needs beyond `kernel::workqueue`.

use super::bindings;
use core::ffi::c_int;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// A work queue of its own (per CPU, high priority, with a rescuer), destroyed, after
/// draining, on drop.
///
/// # Invariants
///
/// `wq` is a live work queue from `alloc_workqueue`, owned by this object.
pub struct Queue {
    wq: NonNull<bindings::workqueue_struct>,
}

// SAFETY: Work queues are used from any context by design.
unsafe impl Send for Queue {}
// SAFETY: As above.
unsafe impl Sync for Queue {}

impl Queue {
    /// A new queue named `name` (the name is copied).
    ///
    /// The engine's work (Read Responses, bulk placement, sends the socket held back) runs
    /// at high priority, as nvme-tcp's I/O work does: an RNIC's engine does not wait for
    /// the host's CPUs, and RDMA applications busy-poll their CQs, which at normal priority
    /// takes the CPU from the work they wait for.
    pub fn new(name: &CStr) -> Result<Self> {
        let flags =
            kernel::bindings::wq_flags_WQ_MEM_RECLAIM | kernel::bindings::wq_flags_WQ_HIGHPRI;
        // SAFETY: `name` is NUL-terminated and passed for the format's one "%s", which
        // copies it.
        let wq = unsafe {
            kernel::bindings::alloc_workqueue(
                c_str!("%s").as_char_ptr(),
                flags,
                0,
                name.as_char_ptr(),
            )
        };
        Ok(Self {
            wq: NonNull::new(wq.cast()).ok_or(ENOMEM)?,
        })
    }

    fn as_kernel(&self) -> *mut kernel::bindings::workqueue_struct {
        self.wq.as_ptr().cast()
    }
}

/// The CPU the engine's work runs on: the next online one after the CPU that queues it
/// (the engine's queue is per CPU). Work is mostly queued from a socket callback, in
/// softirq, which over loopback and veth runs on the sending application's CPU, in its
/// system call: work queued there waits for that application to leave the CPU, two context
/// switches for every Read Response (and between the two at random with an unbound
/// queue), and bulk data placed there competes with its sender.
#[inline]
fn work_cpu() -> c_int {
    next_online_cpu(this_cpu())
}

/// This CPU's number; being moved to another CPU meanwhile only makes a choice made from it
/// a less good one.
#[inline]
fn this_cpu() -> c_int {
    // SAFETY: Reads this CPU's number, with no guarantee that it stays valid (see above).
    unsafe { bindings::riw_raw_smp_processor_id() }
}

/// The next online CPU after `this` (wrapping around), `this` if none other is.
#[inline]
fn next_online_cpu(this: c_int) -> c_int {
    // SAFETY: Reads a global that is fixed after boot.
    let nr_cpu_ids = unsafe { bindings::riw_nr_cpu_ids() };
    // SAFETY: Searches the online mask from `this`, a valid CPU number.
    let mut cpu = unsafe { bindings::riw_cpumask_next_online(this) };
    if cpu >= nr_cpu_ids {
        // SAFETY: Searches the online mask.
        cpu = unsafe { bindings::riw_cpumask_first_online() };
    }
    if cpu < nr_cpu_ids {
        cpu as c_int
    } else {
        this
    }
}

/// Whether work queued now from this CPU with `DelayedWork::run_now` runs on another one,
/// alongside the caller; false with one CPU online, where it runs only once the caller
/// leaves the CPU.
pub fn work_runs_elsewhere() -> bool {
    let this = this_cpu();
    next_online_cpu(this) != this
}

/// How a kernel consumer's recent posts met the work it posted before (see
/// `caller_work_cpu`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PostPace {
    /// None of late found that work still queued or running: one request in flight.
    Quiet,
    /// Some did.
    Occasional,
    /// Most did: a stream of requests, many in flight.
    Streaming,
}

/// The CPU for work handed over by a kernel consumer's call. This one if the caller is
/// softirq or a work item of a high-priority queue (a ULP's completion handler in the
/// ib_cq API's work, a target answering a request there, riw's own work) and its work
/// is not a stream: the work runs right after it in the same pool of workers, with no
/// other CPU woken, and an answer goes out where its request came in. This one too if
/// the caller is a task's own context (an application submitting I/O) and its posts are
/// quiet: it has one request in flight and soon sleeps until the answer comes, and the
/// work, the answer's placement and its completion all run here meanwhile, with no IPI
/// and no other CPU woken. Else the next one, as `work_cpu`: a stream of work is sent
/// while its poster goes on, and a work item of an ordinary queue (a server's request
/// work, a target's completion work, the NFS client's transmit work), which often
/// sleeps until its work completes, would see it queue here behind the completion work
/// this CPU's high-priority workers also run.
fn caller_work_cpu(pace: PostPace) -> c_int {
    // SAFETY: Reads the execution context.
    let (in_task, kworker) =
        unsafe { (bindings::riw_in_task(), bindings::riw_current_is_kworker()) };
    let here = if !in_task || kworker {
        // SAFETY: Reads the current task's nice level.
        let high_priority = !in_task || unsafe { bindings::riw_current_nice() } < 0;
        high_priority && pace != PostPace::Streaming
    } else {
        pace == PostPace::Quiet
    };
    if here {
        this_cpu()
    } else {
        work_cpu()
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: Owned. Items still queued run first; the owners of delayed items cancel
        // their timers before the queue goes (see `DelayedWork`).
        unsafe { bindings::destroy_workqueue(self.wq.as_ptr()) };
    }
}

/// An object that runs in a work queue, later or at once: `run` gets a reference to it.
pub trait DelayedWorkItem: Send + Sync + Sized + 'static {
    /// The work item embedded in the object.
    fn delayed_work(&self) -> &DelayedWork<Self>;

    /// Runs in process context; never concurrently with itself.
    fn run(this: Arc<Self>);
}

/// A `struct delayed_work` inside a `T`. While the item is pending it owns one reference
/// to its `T`, which the run (or a successful cancel) takes back.
///
/// # Invariants
///
/// `dw` is initialised with the callback of `T`; `owner` is NULL or the address of the `T`
/// containing this item, as `Arc::into_raw` gives it.
#[repr(C)]
#[pin_data]
pub struct DelayedWork<T> {
    #[pin]
    dw: Opaque<bindings::delayed_work>,
    owner: AtomicPtr<T>,
    _owner: PhantomData<Arc<T>>,
}

// SAFETY: The C item is driven by the work queue code, which synchronises itself.
unsafe impl<T: Send + Sync> Send for DelayedWork<T> {}
// SAFETY: As above.
unsafe impl<T: Send + Sync> Sync for DelayedWork<T> {}

impl<T: DelayedWorkItem> DelayedWork<T> {
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `dw` is valid for writes and pinned inside its owner.
            dw <- Opaque::ffi_init(|dw| unsafe {
                bindings::riw_init_delayed_work(dw, Some(Self::callback))
            }),
            owner: AtomicPtr::new(core::ptr::null_mut()),
            _owner: PhantomData,
        })
    }

    /// A new reference to `this` as a raw pointer for the queue, once checked that this
    /// item lies inside `this`, recorded as the owner.
    fn owner_ref(this: &Arc<T>) -> Option<*const T> {
        let ptr = Arc::into_raw(this.clone());
        let item = this.delayed_work() as *const Self as usize;
        let start = ptr as usize;
        if item < start || item + core::mem::size_of::<Self>() > start + core::mem::size_of::<T>() {
            // Not `this`'s own item: refuse rather than run the wrong object.
            // SAFETY: From `into_raw` above, not given to anyone.
            drop(unsafe { Arc::from_raw(ptr) });
            return None;
        }
        this.delayed_work()
            .owner
            .store(ptr.cast_mut(), Ordering::Relaxed);
        Some(ptr)
    }

    /// Runs `this` as soon as possible, earlier than a pending timeout would.
    pub fn run_now(this: &Arc<T>, queue: &Queue) {
        Self::run_now_on(this, queue, work_cpu());
    }

    /// As `run_now`, for work a kernel consumer's call hands over (see `caller_work_cpu`);
    /// true if the item was queued already (and not waiting on its timer).
    pub fn run_now_for_caller(this: &Arc<T>, queue: &Queue, pace: PostPace) -> bool {
        Self::run_now_on(this, queue, caller_work_cpu(pace))
    }

    fn run_now_on(this: &Arc<T>, queue: &Queue, cpu: c_int) -> bool {
        let Some(ptr) = Self::owner_ref(this) else {
            return false;
        };
        let dw = this
            .delayed_work()
            .dw
            .get()
            .cast::<kernel::bindings::delayed_work>();
        // Queued, it runs as soon as it can; pending, it was either queued already (left
        // as it is, where mod_delayed_work() would take it off the list and queue it
        // again, at a cost that showed in profiles of every bulk transfer) or waiting on
        // its timer (brought forward). A pending run starts after this and sees what the
        // caller did before.
        // SAFETY: A live queue and an initialised item (the same C type in both bindings);
        // a pending item already owns a reference, so ours goes back if it was pending.
        let (was_pending, was_queued) = unsafe {
            if kernel::bindings::queue_delayed_work_on(cpu, queue.as_kernel(), dw, 0) {
                (false, false)
            } else if bindings::riw_timer_pending(core::ptr::addr_of!((*dw).timer).cast()) {
                let pending = kernel::bindings::mod_delayed_work_on(cpu, queue.as_kernel(), dw, 0);
                (pending, false)
            } else {
                (true, true)
            }
        };
        if was_pending {
            // SAFETY: Our reference from `owner_ref`, not taken by the queue.
            drop(unsafe { Arc::from_raw(ptr) });
        }
        was_queued
    }

    /// Runs `this` after `jiffies`, unless it is pending already (then nothing changes).
    pub fn run_after(this: &Arc<T>, queue: &Queue, jiffies: u64) {
        let Some(ptr) = Self::owner_ref(this) else {
            return;
        };
        // An `unsigned long` (which the kernel's bindings spell `usize`).
        let delay = usize::try_from(jiffies).unwrap_or(usize::MAX);
        let dw = this
            .delayed_work()
            .dw
            .get()
            .cast::<kernel::bindings::delayed_work>();
        // SAFETY: As in `run_now`; a newly queued item takes our reference.
        let queued = unsafe {
            kernel::bindings::queue_delayed_work_on(work_cpu(), queue.as_kernel(), dw, delay)
        };
        if !queued {
            // SAFETY: Our reference from `owner_ref`, not taken by the queue.
            drop(unsafe { Arc::from_raw(ptr) });
        }
    }

    /// Cancels a pending run (a running one finishes).
    pub fn cancel(this: &Arc<T>) {
        let item = this.delayed_work();
        // SAFETY: An initialised item.
        if unsafe { bindings::cancel_delayed_work(item.dw.get()) } {
            let ptr = item.owner.load(Ordering::Relaxed);
            // SAFETY: A pending item held the reference of `owner_ref` on `owner`, which
            // the cancel handed back to us; `this` keeps the object alive meanwhile.
            drop(unsafe { Arc::from_raw(ptr) });
        }
    }

    /// Cancels a pending run and waits for a running one to finish.
    pub fn cancel_sync(this: &Arc<T>) {
        let item = this.delayed_work();
        // SAFETY: An initialised item; may sleep, as the caller can.
        if unsafe { bindings::cancel_delayed_work_sync(item.dw.get()) } {
            let ptr = item.owner.load(Ordering::Relaxed);
            // SAFETY: As in `cancel`.
            drop(unsafe { Arc::from_raw(ptr) });
        }
    }

    unsafe extern "C" fn callback(work: *mut bindings::work_struct) {
        // `work` is the first field of `struct delayed_work`, itself the first field of
        // this `repr(C)` type.
        let item = work.cast::<Self>();
        // SAFETY: The queue calls this for an item queued by `run_now`/`run_after`, which
        // stored the owner before queueing; the owner is alive through the reference the
        // pending item owned, which passes to `run`.
        unsafe {
            let ptr = (*item).owner.load(Ordering::Relaxed);
            T::run(Arc::from_raw(ptr));
        }
    }
}

/// A `struct completion`: one side waits until the other signals.
///
/// # Invariants
///
/// `done` is initialised.
#[pin_data]
pub struct Completion {
    #[pin]
    done: Opaque<bindings::completion>,
}

// SAFETY: Completions are used across threads by design.
unsafe impl Send for Completion {}
// SAFETY: As above.
unsafe impl Sync for Completion {}

impl Completion {
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `done` is valid for writes and pinned.
            done <- Opaque::ffi_init(|done| unsafe { bindings::riw_init_completion(done) }),
        })
    }

    /// Signals one waiter (or the next one to wait).
    pub fn complete(&self) {
        // SAFETY: Initialised (type invariant).
        unsafe { bindings::complete(self.done.get()) };
    }

    /// Waits, uninterruptibly, for `complete`.
    pub fn wait(&self) {
        // SAFETY: Initialised (type invariant); may sleep, as the caller can.
        unsafe { bindings::wait_for_completion(self.done.get()) };
    }
}

/// The current time in jiffies.
pub fn jiffies() -> u64 {
    // SAFETY: Reads a global counter.
    u64::from(unsafe { bindings::riw_jiffies() })
}

/// `ms` milliseconds in jiffies.
pub fn msecs_to_jiffies(ms: u32) -> u64 {
    // SAFETY: Pure conversion.
    u64::from(unsafe { bindings::riw_msecs_to_jiffies(ms) })
}

/// The module's queue of releases: of table entries after an RCU grace period
/// ([`super::xarray::ArcTable`]), and of pinned user memory dropped where it may not sleep
/// ([`super::rdma::mr::UserMemory`]). The driver sets it up before anything can use it
/// and tears it down once nothing can any more.
pub mod release {
    use super::super::bindings;
    use core::ptr::null_mut;
    use core::sync::atomic::{AtomicPtr, Ordering};
    use kernel::c_str;
    use kernel::prelude::*;

    /// The queue: NULL but between [`init`] and [`exit`].
    static QUEUE: AtomicPtr<kernel::bindings::workqueue_struct> = AtomicPtr::new(null_mut());

    /// Sets up the queue.
    ///
    /// # Safety
    ///
    /// Called once before any other function of this module, and not again before
    /// [`exit`].
    pub unsafe fn init() -> Result {
        let flags = kernel::bindings::wq_flags_WQ_UNBOUND;
        // SAFETY: A format without conversions and a static name.
        let wq = unsafe {
            kernel::bindings::alloc_workqueue(c_str!("riw_release").as_char_ptr(), flags, 0)
        };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        QUEUE.store(wq, Ordering::Release);
        Ok(())
    }

    /// Runs the releases still queued and tears the queue down. A zero-copy release
    /// callback may still be on its way out of this module's code (its RCU read section,
    /// in rust/socket.rs): this waits for it too.
    ///
    /// # Safety
    ///
    /// After a successful [`init`], once nothing can queue a release any more.
    pub unsafe fn exit() {
        let wq = QUEUE.swap(null_mut(), Ordering::AcqRel);
        // SAFETY: Wait for RCU readers and callbacks; may sleep, as module teardown can.
        unsafe {
            kernel::bindings::synchronize_rcu();
            kernel::bindings::rcu_barrier();
        }
        // SAFETY: The queue `init` made; the caller guarantees nothing queues on it now,
        // and destroying it runs what it holds.
        unsafe { kernel::bindings::destroy_workqueue(wq) };
    }

    /// Waits for every table entry retired so far to be released.
    ///
    /// # Safety
    ///
    /// Between [`init`] and [`exit`], in a context that may sleep.
    pub unsafe fn flush() {
        // SAFETY: By the caller's guarantees: the queue is live and we may sleep. The
        // barrier first, so that the entries' works are on the queue when it is flushed.
        unsafe {
            kernel::bindings::rcu_barrier();
            kernel::bindings::__flush_workqueue(QUEUE.load(Ordering::Acquire));
        }
    }

    /// Queues `work` (a no-op if it is pending already).
    ///
    /// # Safety
    ///
    /// Between [`init`] and [`exit`]; `work` is initialised and stays valid until it runs.
    pub(in crate::kernel_ext) unsafe fn queue(work: *mut bindings::work_struct) {
        // SAFETY: By the caller's guarantees; the two bindings name the same C type.
        unsafe {
            kernel::bindings::queue_work_on(
                kernel::bindings::wq_misc_consts_WORK_CPU_UNBOUND as _,
                QUEUE.load(Ordering::Acquire),
                work.cast(),
            )
        };
    }

    /// Queues `rwork` to run after an RCU grace period.
    ///
    /// # Safety
    ///
    /// As for [`queue`].
    pub(in crate::kernel_ext) unsafe fn queue_after_grace_period(rwork: *mut bindings::rcu_work) {
        // SAFETY: By the caller's guarantees; the two bindings name the same C type.
        unsafe { kernel::bindings::queue_rcu_work(QUEUE.load(Ordering::Acquire), rwork.cast()) };
    }
}
