//! The register table against the trampolines: for every register the
//! architecture names, what `query_register_offset_in` answers for each of
//! the four saves (sparse and full, at entry and at return) is checked
//! against what that save's trampoline really stored. A call through
//! `arch::selftest::call_with_every_register` gives every register a known,
//! distinct value and poisons the stack the trampoline's frame will take;
//! a callback then reads every slot of the save, written or not. A register
//! the table calls saved must hold its value, and a register it calls
//! unsaved must still hold the poison: the table and the trampolines cannot
//! disagree in either direction.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;

use arch::ftrace_abi::{RegisterError, Saved, FTRACE_REGS_PT};
use arch::regs::REGISTERS;
use arch::selftest::{
    call_with_every_register, expected_in_save, mark_caller_saved_registers, raw_saved_word, EveryRegisterCall, POISON,
};
use ftrace::{FilterKind, FilterMode, FtraceOps, FtraceRegs, OpsFlags};
use ktest_macros::ktest;
use rethook::{Rethook, RethookMode, RethookNode};

use crate::tests::ftrace::graph::address;

/// What one register looked like from inside a callback.
#[derive(Clone, Copy, Debug)]
struct Seen {
    /// The save's word for it, written by the trampoline or not.
    raw: u64,
    /// `query_register_offset_in(save, name)`.
    query: Result<usize, RegisterError>,
    /// `register_at` of the offset the query gave.
    read: Option<u64>,
    /// `register_at` of the register's offset, whatever the query said.
    read_anyway: Option<u64>,
}

/// One save, every register of the table, in table order.
struct SaveSeen {
    saved: Saved,
    call: EveryRegisterCall,
    registers: Vec<Seen>,
}

static SEEN: spin::Mutex<Option<SaveSeen>> = spin::Mutex::new(None);

/// Reads every register of `fregs`, as the table names them. Runs with
/// interrupts masked (the harness masks them), in a callback.
fn record(fregs: &FtraceRegs, call: EveryRegisterCall) {
    let registers = REGISTERS
        .iter()
        .map(|info| {
            let query = FtraceRegs::query_register_offset_in(fregs.saved(), info.names[0]);
            Seen {
                raw: raw_saved_word(fregs, info.offset),
                query,
                read: query.ok().and_then(|offset| fregs.register_at(offset)),
                read_anyway: fregs.register_at(FTRACE_REGS_PT + info.offset),
            }
        })
        .collect();
    *SEEN.lock() = Some(SaveSeen { saved: fregs.saved(), call, registers });
}

/// Every disagreement between the table, the accessors and the save.
fn disagreements(seen: &SaveSeen) -> Vec<String> {
    let mut problems = Vec::new();
    let bit = seen.saved.bit();
    for (info, register) in REGISTERS.iter().zip(&seen.registers) {
        let name = info.names[0];
        for alias in info.names {
            if FtraceRegs::query_register_offset_in(seen.saved, alias) != register.query {
                problems.push(format!("{alias}: answered otherwise than {name}"));
            }
        }
        let (mask, value) = expected_in_save(name, seen.saved, seen.call);
        let in_table = info.saved_by & bit != 0;
        match register.query {
            Ok(offset) => {
                if offset != FTRACE_REGS_PT + info.offset {
                    problems.push(format!("{name}: offset {offset}, not its field's"));
                }
                if register.raw & mask != value & mask {
                    problems.push(format!(
                        "{name}: the query says saved, but the trampoline stored {:#x}, not {:#x} (mask {mask:#x})",
                        register.raw, value
                    ));
                }
                if register.read != Some(register.raw) {
                    problems.push(format!("{name}: register_at read {:?}, the save holds {:#x}", register.read, register.raw));
                }
                if !in_table {
                    problems.push(format!("{name}: the query accepts it, the table says this save does not record it"));
                }
            }
            Err(error) => {
                if error != RegisterError::NotSaved {
                    problems.push(format!("{name}: {error:?}, not NotSaved"));
                }
                if register.raw != POISON {
                    problems.push(format!(
                        "{name}: refused as not saved, but the trampoline wrote {:#x} there (the table is missing it)",
                        register.raw
                    ));
                }
                if register.read_anyway.is_some() {
                    problems.push(format!("{name}: refused by the query, but register_at reads it"));
                }
                if in_table {
                    problems.push(format!("{name}: in the table for this save, refused by the query"));
                }
            }
        }
    }
    problems
}

/// Takes what a callback recorded and checks it was the save `saved` of a
/// call to `function` from the harness.
fn check(saved: Saved, function: usize) {
    let seen = SEEN.lock().take().unwrap_or_else(|| panic!("{saved:?}: the callback never ran"));
    assert_eq!(seen.saved, saved);
    assert_eq!(seen.registers.len(), REGISTERS.len());
    let caller = ftrace::symbols::kernel::name_of(seen.call.return_address).unwrap_or("?");
    assert!(caller.ends_with("every_register_harness"), "{saved:?}: returns into {caller}");
    assert_eq!(seen.call.function, function, "{saved:?}: the function");
    let problems = disagreements(&seen);
    assert!(problems.is_empty(), "{saved:?}:\n  {}", problems.join("\n  "));
}

// ---- entry saves: an ops on a function the harness calls ----

#[inline(never)]
extern "C" fn entered_with_every_register() {
    black_box(0);
}

extern "C" fn record_entry(ip: usize, parent_ip: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    record(fregs, EveryRegisterCall { function: ip, return_address: parent_ip });
}

static SPARSE_ENTRY: FtraceOps = FtraceOps::new(record_entry, OpsFlags::empty());
static FULL_ENTRY: FtraceOps = FtraceOps::new(record_entry, OpsFlags::SAVE_REGS);

#[ktest]
fn every_register_of_both_entry_saves_is_what_the_table_says() {
    let f = address(entered_with_every_register as extern "C" fn());
    for (ops, saved) in [(&SPARSE_ENTRY, Saved::EntryArgs), (&FULL_ENTRY, Saved::EntryFull)] {
        ftrace::set_filter_ips(ops, FilterKind::Filter, &[f], FilterMode::Replace).unwrap();
        ftrace::register(ops).unwrap();
        // SAFETY: an `extern "C" fn()` that returns; nothing unwinds it
        // (the callback only records) and it runs with interrupts masked.
        let clobbered = unsafe { call_with_every_register(f) };
        ftrace::unregister(ops).unwrap();
        assert_eq!(clobbered, 0, "{saved:?}: callee-saved registers survive the trampoline");
        check(saved, f);
    }
}

// ---- return saves: a rethook on a function that marks its return ----

#[inline(never)]
extern "C" fn returns_with_every_register() -> u64 {
    mark_caller_saved_registers()
}

fn record_return(_node: &RethookNode, _data: usize, ret_addr: usize, fregs: &mut FtraceRegs) {
    let function = address(returns_with_every_register as extern "C" fn() -> u64);
    record(fregs, EveryRegisterCall { function, return_address: ret_addr });
}

static RETURN_HOOK: spin::Mutex<Option<Rethook>> = spin::Mutex::new(None);

extern "C" fn hook_return(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    let guard = RETURN_HOOK.lock();
    if let Some(node) = guard.as_ref().and_then(|rethook| rethook.try_get()) {
        let _ = node.hook(fregs);
    }
}

static RETURN_ENTRY: FtraceOps = FtraceOps::new(hook_return, OpsFlags::RECURSION);

#[ktest]
fn every_register_of_both_return_saves_is_what_the_table_says() {
    let f = address(returns_with_every_register as extern "C" fn() -> u64);
    for (mode, saved) in [(RethookMode::Sparse, Saved::Return), (RethookMode::FullRegs, Saved::ReturnFull)] {
        *RETURN_HOOK.lock() = Some(Rethook::new(record_return, 0, 2, 1, mode));
        ftrace::set_filter_ips(&RETURN_ENTRY, FilterKind::Filter, &[f], FilterMode::Replace).unwrap();
        ftrace::register(&RETURN_ENTRY).unwrap();
        // SAFETY: as above.
        let clobbered = unsafe { call_with_every_register(f) };
        ftrace::unregister(&RETURN_ENTRY).unwrap();
        drop(RETURN_HOOK.lock().take());
        assert_eq!(clobbered, 0, "{saved:?}: callee-saved registers survive the return trampoline");
        check(saved, f);
    }
}
