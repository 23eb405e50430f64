//! kretprobes: a handler at a function's return, with every register, on
//! the shared return hook.
//!
//! A kretprobe is an ftrace ops on the function's entry asking for
//! `SAVE_REGS`, and a [`Rethook`] in full-registers mode with `maxactive`
//! nodes of `data_words` words: the entry callback takes a node (none left:
//! a miss), lets the entry handler fill the node's words, and hooks the
//! call. At the return the handler gets the words, the address the call
//! returns to and the return registers. Both handlers count as probe
//! handlers (see `probe::run_handler`): inside another probe's handler they
//! are skipped and counted as missed.
//!
//! Unregistering stops new hooks and waits for the entry callbacks, then
//! drops the rethook (hooked calls still in flight return normally, without
//! the handler) and waits again before freeing the probe.

use alloc::boxed::Box;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use arch::ftrace_abi::{FtraceRegs, PtRegs};
use ftrace::{FtraceOps, OpsFlags};
use rethook::{Rethook, RethookMode, RethookNode};

use crate::location::Location;
use crate::probe::{register_entry_ops, resolve, run_handler, KprobeError, Place};

/// The entry handler: the probe, the entry registers, the call's data words.
/// Like a kprobe's handlers, it reads the registers and changes none.
pub type EntryHandler = fn(rp: &Kretprobe, regs: &PtRegs, data: &mut [u64]);
/// The return handler: the probe, where the call returns to, the return
/// registers, the call's data words.
pub type ReturnHandler = fn(rp: &Kretprobe, ret_addr: usize, regs: &PtRegs, data: &[u64]);

/// The most calls a kretprobe hooks at once when the caller does not say.
pub const DEFAULT_MAXACTIVE: usize = 16;
/// The most data words per call.
pub const MAX_DATA_WORDS: usize = 16;

/// What a kretprobe does, before it is registered.
#[derive(Clone, Copy)]
pub struct KretprobeConfig {
    pub entry_handler: Option<EntryHandler>,
    pub handler: ReturnHandler,
    /// Data words per call, for the entry handler to fill.
    pub data_words: usize,
    /// Calls hooked at once (0: [`DEFAULT_MAXACTIVE`]).
    pub maxactive: usize,
    pub private: usize,
}

/// A registered kretprobe, as handlers see it.
#[repr(C)]
pub struct Kretprobe {
    ops: FtraceOps,
    place: Place,
    config: KretprobeConfig,
    rethook: Option<Rethook>,
    hits: AtomicU64,
    missed: AtomicU64,
}

impl Kretprobe {
    /// The private data given at registration.
    pub fn private(&self) -> usize {
        self.config.private
    }

    /// The probed function's place.
    pub fn place(&self) -> &Place {
        &self.place
    }
}

/// A registered kretprobe; dropping it unregisters it.
pub struct RegisteredKretprobe {
    probe: NonNull<Kretprobe>,
}

// SAFETY: the handle reaches the probe through atomics and the ftrace
// registry, which serialises itself.
unsafe impl Send for RegisteredKretprobe {}
// SAFETY: as above.
unsafe impl Sync for RegisteredKretprobe {}

/// Registers a kretprobe on the function at `location` (its entry only).
pub fn register_kretprobe(location: &Location, config: KretprobeConfig) -> Result<RegisteredKretprobe, KprobeError> {
    let place = resolve(location)?;
    if !place.at_entry {
        return Err(KprobeError::NotAtEntry { function: place.function.into(), offset: place.offset });
    }
    if config.data_words > MAX_DATA_WORDS {
        return Err(KprobeError::TooMuchData { words: config.data_words, max: MAX_DATA_WORDS });
    }
    let maxactive = if config.maxactive == 0 { DEFAULT_MAXACTIVE } else { config.maxactive };
    // The handle writes (`Drop` takes the rethook) and frees through this
    // pointer: it keeps the box's ownership, which a pointer made from a
    // shared reference would not.
    let raw = Box::into_raw(Box::new(Kretprobe {
        ops: FtraceOps::new(on_entry, OpsFlags::SAVE_REGS | OpsFlags::RECURSION),
        place,
        config,
        rethook: None,
        hits: AtomicU64::new(0),
        missed: AtomicU64::new(0),
    }));
    let rethook = Rethook::new(on_return, raw as usize, maxactive, config.data_words, RethookMode::FullRegs);
    // SAFETY: just made and not shared yet.
    unsafe { (*raw).rethook = Some(rethook) };
    // SAFETY: as above; writes go through `raw` only after this is unused.
    let probe: &'static Kretprobe = unsafe { &*raw };
    probe.ops.set_container(probe);
    match register_entry_ops(&probe.ops, probe.place.address) {
        // SAFETY: from `Box::into_raw`, not null.
        Ok(()) => Ok(RegisteredKretprobe { probe: unsafe { NonNull::new_unchecked(raw) } }),
        Err(error) => {
            // SAFETY: never registered; made by `Box::into_raw` above. Its
            // rethook hooked nothing, so dropping it frees it after a grace
            // period.
            drop(unsafe { Box::from_raw(raw) });
            Err(KprobeError::Ftrace(error))
        }
    }
}

impl RegisteredKretprobe {
    fn probe(&self) -> &Kretprobe {
        // SAFETY: the handle keeps the probe alive until it is dropped.
        unsafe { self.probe.as_ref() }
    }

    /// Calls whose return was hooked.
    pub fn hits(&self) -> u64 {
        self.probe().hits.load(Ordering::Relaxed)
    }

    /// Calls not hooked or not handled: more than `maxactive` in flight,
    /// a full return stack, or inside another probe's handler.
    pub fn nmissed(&self) -> u64 {
        let probe = self.probe();
        probe.missed.load(Ordering::Relaxed) + probe.ops.missed() + probe.rethook.as_ref().map_or(0, Rethook::missed)
    }

    /// Hooked calls that have not returned yet.
    pub fn in_flight(&self) -> usize {
        self.probe().rethook.as_ref().map_or(0, Rethook::in_flight)
    }

    /// Unregisters: once this returns no handler of the probe runs.
    pub fn unregister(self) {
        drop(self);
    }
}

impl Drop for RegisteredKretprobe {
    fn drop(&mut self) {
        let probe = self.probe.as_ptr();
        // SAFETY: the handle owns the probe until the end of this function.
        let probe_ref: &'static Kretprobe = unsafe { &*probe };
        // Refused (a drop inside a callback, with interrupts masked, in an
        // interrupt): the ops stays registered and leads to the probe,
        // which is leaked rather than freed under it.
        if ftrace::unregister(&probe_ref.ops).is_err() {
            return;
        }
        ftrace::deferred::synchronize();
        // SAFETY: no entry callback runs any more; returns read the
        // rethook only through its own reference-counted state.
        drop(unsafe { (*probe).rethook.take() });
        ftrace::deferred::synchronize();
        // SAFETY: no callback reaches the probe any more; leaked in
        // `register_kretprobe`.
        drop(unsafe { Box::from_raw(probe) });
    }
}

extern "C" fn on_entry(_ip: usize, _parent_ip: usize, ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: only `register_kretprobe` installs this callback, in a probe
    // that lives until its ops is unregistered and a grace period passed.
    let probe = unsafe { &*ops.container::<Kretprobe>() };
    let Some(rethook) = probe.rethook.as_ref() else { return };
    if fregs.regs().is_none() {
        return;
    }
    run_handler(&probe.missed, || {
        let Some(mut node) = rethook.try_get() else { return };
        if let (Some(entry), Some(regs)) = (probe.config.entry_handler, fregs.regs()) {
            let data = node.data_mut();
            data.fill(0);
            entry(probe, regs, data);
        }
        if node.hook(fregs).is_ok() {
            probe.hits.fetch_add(1, Ordering::Relaxed);
        }
    });
}

fn on_return(node: &RethookNode, data: usize, ret_addr: usize, fregs: &mut FtraceRegs) {
    // SAFETY: the rethook's data is its probe, freed only after the
    // rethook is stopped (which the rethook checked before calling this
    // handler) and a grace period.
    let probe = unsafe { &*(data as *const Kretprobe) };
    let Some(regs) = fregs.regs() else { return };
    run_handler(&probe.missed, || (probe.config.handler)(probe, ret_addr, regs, node.data()));
}
