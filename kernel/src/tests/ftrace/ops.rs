//! The ftrace core: site bytes, trampolines, registers, ops, filters,
//! recursion, patching safety. Every tracee here is ordinary kernel code
//! (compiled with patchable entries); each test leaves tracing as it found it.

use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use arch::context::{self, Context};
use arch::ftrace::{call_insn, Insn, CALL_OFFSET, INSN_LEN, NOP, PREPARE};
use arch::ftrace_abi::{trampoline_address, PtRegs, SavedRegs};
use arch::selftest::{
    call_with_marked_registers, scratch_register, CORRUPT_INSN, MARKED_FLAGS, MARKED_REGISTERS, SCRATCH_REGISTER,
};
use arch::text::TextPatcher;
use ftrace::{FilterKind, FilterMode, FtraceError, FtraceOps, FtraceRegs, OpsFlags, RegisterError, Saved, Trampoline};
use ktest_macros::ktest;

// ---- helpers ----

fn read_text<const N: usize>(addr: usize) -> [u8; N] {
    let mut bytes = [0; N];
    arch::text::read(addr, &mut bytes).expect("kernel text");
    bytes
}

fn call_slot(function: usize) -> Insn {
    read_text::<INSN_LEN>(function + CALL_OFFSET)
}

fn literal(function: usize) -> u64 {
    u64::from_ne_bytes(read_text::<8>(function - 8))
}

fn call_to(function: usize, trampoline: Trampoline) -> Insn {
    call_insn(function + CALL_OFFSET, trampoline_address(trampoline)).expect("trampoline in reach")
}

fn ops_count(function: usize) -> u32 {
    ftrace::site(function).expect("a traceable function").ops_count
}

/// Registers `ops` traced only at `functions`.
fn trace_only(ops: &'static FtraceOps, functions: &[usize]) {
    ftrace::set_filter_ips(ops, FilterKind::Filter, functions, FilterMode::Replace).expect("filter");
    ftrace::register(ops).expect("register");
}

fn address<T>(f: T) -> usize
where
    T: Copy,
{
    // SAFETY: only used on function pointers, which are pointer-sized.
    unsafe { core::mem::transmute_copy::<T, usize>(&f) }
}

fn counting(counter: &'static AtomicU64) -> impl Fn() -> u64 {
    move || counter.load(Ordering::SeqCst)
}

// ---- site bytes ----

#[inline(never)]
extern "C" fn bytes_tracee() -> u64 {
    black_box(7)
}

static ARGS_CALLS: AtomicU64 = AtomicU64::new(0);
static REGS_CALLS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_args(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    ARGS_CALLS.fetch_add(1, Ordering::SeqCst);
    assert!(fregs.has_args());
}

extern "C" fn count_regs(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    REGS_CALLS.fetch_add(1, Ordering::SeqCst);
    assert!(fregs.regs().is_some());
}

static ARGS_OPS: FtraceOps = FtraceOps::new(count_args, OpsFlags::empty());
static REGS_OPS: FtraceOps = FtraceOps::new(count_regs, OpsFlags::SAVE_REGS);

#[ktest]
fn site_bytes_follow_enable_switch_and_disable() {
    let f = address(bytes_tracee as extern "C" fn() -> u64);
    assert_eq!(call_slot(f), NOP, "the compiled NOP before tracing");
    for (offset, _compiled, prepared) in PREPARE {
        assert_eq!(read_text::<INSN_LEN>(f + offset), *prepared, "prepared at boot");
    }
    let (args, regs) = (counting(&ARGS_CALLS), counting(&REGS_CALLS));
    let (args0, regs0) = (args(), regs());

    trace_only(&ARGS_OPS, &[f]);
    assert_eq!(call_slot(f), call_to(f, Trampoline::Args), "ARGS ops: call ftrace_caller");
    assert_eq!(literal(f), &ARGS_OPS as *const FtraceOps as u64, "one ops: the literal is the ops");
    assert_eq!(bytes_tracee(), 7);
    assert_eq!((args() - args0, regs() - regs0), (1, 0));

    trace_only(&REGS_OPS, &[f]);
    assert_eq!(call_slot(f), call_to(f, Trampoline::Regs), "a SAVE_REGS ops moves the site to REGS");
    assert_eq!(ops_count(f), 2);
    let list = literal(f);
    assert!(list != &ARGS_OPS as *const FtraceOps as u64 && list != &REGS_OPS as *const FtraceOps as u64);
    assert_eq!(bytes_tracee(), 7);
    assert_eq!((args() - args0, regs() - regs0), (2, 1), "two ops on one site: both called");

    ftrace::unregister(&REGS_OPS).unwrap();
    assert_eq!(call_slot(f), call_to(f, Trampoline::Args), "back to ARGS when SAVE_REGS goes");
    assert_eq!(literal(f), &ARGS_OPS as *const FtraceOps as u64);
    ftrace::unregister(&ARGS_OPS).unwrap();
    assert_eq!(call_slot(f), NOP, "the exact original NOP after disabling");
    assert_eq!(bytes_tracee(), 7);
    assert_eq!((args() - args0, regs() - regs0), (2, 1), "no calls once disabled");
}

// ---- what a callback sees ----

#[derive(Clone, Copy, Default)]
struct Seen {
    ip: usize,
    parent_ip: usize,
    args: [Option<u64>; 8],
    sp: usize,
    return_address: Option<usize>,
    saved: Option<Saved>,
}

static SEEN: spin::Mutex<Seen> =
    spin::Mutex::new(Seen { ip: 0, parent_ip: 0, args: [None; 8], sp: 0, return_address: None, saved: None });

extern "C" fn record_entry(ip: usize, parent_ip: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    let mut seen = SEEN.lock();
    seen.ip = ip;
    seen.parent_ip = parent_ip;
    for (n, arg) in seen.args.iter_mut().enumerate() {
        *arg = fregs.argument(n);
    }
    seen.sp = fregs.stack_pointer();
    seen.return_address = fregs.return_address();
    seen.saved = Some(fregs.saved());
}

static RECORD_OPS: FtraceOps = FtraceOps::new(record_entry, OpsFlags::empty());

const ARGS: [u64; 8] = [
    0x0a0a_0000_0000_0000,
    0x0b0b_0000_0000_0001,
    0x0c0c_0000_0000_0002,
    0x0d0d_0000_0000_0003,
    0x0e0e_0000_0000_0004,
    0x0f0f_0000_0000_0005,
    0x1010_0000_0000_0006,
    0x1111_0000_0000_0007,
];

#[inline(never)]
extern "C" fn eight_args(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64, g: u64, h: u64) -> u64 {
    black_box(a ^ b ^ c ^ d ^ e ^ f ^ g ^ h)
}

#[ktest]
fn callback_sees_ip_parent_and_arguments() {
    let f = address(eight_args as extern "C" fn(u64, u64, u64, u64, u64, u64, u64, u64) -> u64);
    trace_only(&RECORD_OPS, &[f]);
    let caller_sp = arch::cpu::stack_pointer();
    let result = eight_args(ARGS[0], ARGS[1], ARGS[2], ARGS[3], ARGS[4], ARGS[5], ARGS[6], ARGS[7]);
    ftrace::unregister(&RECORD_OPS).unwrap();
    assert_eq!(result, ARGS.iter().fold(0, |acc, a| acc ^ a), "the function still runs normally");

    let seen = *SEEN.lock();
    assert_eq!(seen.ip, f, "ip is the traced function");
    assert_eq!(seen.saved, Some(Saved::EntryArgs));
    assert_eq!(
        ftrace::symbols::kernel::name_of(seen.parent_ip),
        Some("kernel::tests::ftrace::ops::callback_sees_ip_parent_and_arguments"),
        "parent_ip returns into the caller"
    );
    assert_eq!(seen.return_address, Some(seen.parent_ip), "the return address is the parent ip");
    for (n, expected) in ARGS.iter().enumerate() {
        assert_eq!(seen.args[n], Some(*expected), "argument {n}");
    }
    assert!(seen.sp <= caller_sp && caller_sp - seen.sp < 128, "entry sp {:#x} just below the caller's {caller_sp:#x}", seen.sp);
}

// ---- changing control flow: override and IPMODIFY ----

static BODY_RUNS: AtomicU64 = AtomicU64::new(0);

#[inline(never)]
extern "C" fn overridable(x: u64) -> u64 {
    BODY_RUNS.fetch_add(1, Ordering::SeqCst);
    black_box(x + 1)
}

extern "C" fn skip_with_value(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: only set on `overridable`, whose body only counts its runs
    // (the test checks it did not run) and whose callers take any u64.
    unsafe {
        fregs.set_return_value(0x5eed);
        fregs.override_function_with_return();
    }
}

static OVERRIDE_ARGS_OPS: FtraceOps = FtraceOps::new(skip_with_value, OpsFlags::IPMODIFY);
static OVERRIDE_REGS_OPS: FtraceOps = FtraceOps::new(skip_with_value, OpsFlags::IPMODIFY.union(OpsFlags::SAVE_REGS));

#[ktest]
fn override_returns_the_chosen_value_without_running_the_body() {
    let f = address(overridable as extern "C" fn(u64) -> u64);
    for ops in [&OVERRIDE_ARGS_OPS, &OVERRIDE_REGS_OPS] {
        let runs = BODY_RUNS.load(Ordering::SeqCst);
        trace_only(ops, &[f]);
        assert_eq!(overridable(black_box(1)), 0x5eed);
        assert_eq!(BODY_RUNS.load(Ordering::SeqCst), runs, "the body did not run");
        ftrace::unregister(ops).unwrap();
        assert_eq!(overridable(black_box(1)), 2);
        assert_eq!(BODY_RUNS.load(Ordering::SeqCst), runs + 1);
    }
}

#[inline(never)]
extern "C" fn original(a: u64, b: u64) -> u64 {
    black_box(a + b)
}

#[inline(never)]
extern "C" fn replacement(a: u64, b: u64) -> u64 {
    black_box(a * b)
}

extern "C" fn redirect(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: only set on `original`, which `replacement` (same signature,
    // no state) takes over.
    unsafe { fregs.set_instruction_pointer(replacement as *const () as usize) };
}

static REDIRECT_OPS: FtraceOps = FtraceOps::new(redirect, OpsFlags::IPMODIFY);
static REDIRECT_REGS_OPS: FtraceOps = FtraceOps::new(redirect, OpsFlags::IPMODIFY.union(OpsFlags::SAVE_REGS));
static SECOND_REDIRECT_OPS: FtraceOps = FtraceOps::new(redirect, OpsFlags::IPMODIFY);

#[ktest]
fn ipmodify_redirects_to_a_replacement_and_is_exclusive() {
    let f = address(original as extern "C" fn(u64, u64) -> u64);
    assert_eq!(original(black_box(6), black_box(7)), 13);
    trace_only(&REDIRECT_OPS, &[f]);
    assert_eq!(original(black_box(6), black_box(7)), 42, "ARGS trampoline honours a new ip");

    ftrace::set_filter_ips(&SECOND_REDIRECT_OPS, FilterKind::Filter, &[f], FilterMode::Replace).unwrap();
    let refused = ftrace::register(&SECOND_REDIRECT_OPS);
    assert!(matches!(refused, Err(FtraceError::IpModifyConflict(name)) if name.ends_with("::original")));
    assert!(!ftrace::is_registered(&SECOND_REDIRECT_OPS));
    assert_eq!(ops_count(f), 1, "nothing changed");
    assert!(ftrace::site(f).unwrap().ipmodify);

    // With tracing off the conflict is still refused: turning tracing back
    // on must not find one.
    ftrace::set_enabled(false).unwrap();
    let refused = ftrace::register(&SECOND_REDIRECT_OPS);
    assert!(matches!(refused, Err(FtraceError::IpModifyConflict(_))), "{refused:?}");
    assert_eq!(ftrace::set_enabled(true), Ok(()));
    assert_eq!(original(black_box(6), black_box(7)), 42);

    ftrace::unregister(&REDIRECT_OPS).unwrap();
    trace_only(&REDIRECT_REGS_OPS, &[f]);
    assert_eq!(original(black_box(6), black_box(7)), 42, "REGS trampoline honours a new ip");
    ftrace::unregister(&REDIRECT_REGS_OPS).unwrap();
    assert_eq!(original(black_box(6), black_box(7)), 13);
}

// ---- full and sparse register saves ----

#[inline(never)]
extern "C" fn marked_tracee() {
    black_box(0);
}

static MARKED_SEEN: spin::Mutex<Vec<(&'static str, Option<u64>)>> = spin::Mutex::new(Vec::new());
static FLAGS_SEEN: AtomicU64 = AtomicU64::new(0);

extern "C" fn record_marked(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    let regs = fregs.regs().expect("SAVE_REGS gets the full registers");
    let mut seen = MARKED_SEEN.lock();
    seen.clear();
    for (name, _) in MARKED_REGISTERS {
        seen.push((name, regs.register(name)));
    }
    FLAGS_SEEN.store(regs.register(MARKED_FLAGS.0).unwrap_or(0), Ordering::SeqCst);
}

static FULL_OPS: FtraceOps = FtraceOps::new(record_marked, OpsFlags::SAVE_REGS);

static SPARSE_SEEN: spin::Mutex<Option<(bool, PtRegsSummary)>> = spin::Mutex::new(None);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PtRegsSummary {
    callee_saved_zero: bool,
    sp_matches: bool,
}

extern "C" fn record_sparse(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    let has_regs = fregs.regs().is_some();
    let partial = fregs.partial_regs();
    let summary = PtRegsSummary {
        callee_saved_zero: MARKED_REGISTERS.iter().all(|(name, _)| partial.register(name) == Some(0)),
        sp_matches: partial.sp() == fregs.stack_pointer(),
    };
    *SPARSE_SEEN.lock() = Some((has_regs, summary));
}

static SPARSE_OPS: FtraceOps = FtraceOps::new(record_sparse, OpsFlags::empty());

#[ktest]
fn save_regs_sees_marked_registers_and_flags() {
    let f = address(marked_tracee as extern "C" fn());
    trace_only(&FULL_OPS, &[f]);
    // SAFETY: `marked_tracee` is an `extern "C" fn()` that returns.
    let clobbered = unsafe { call_with_marked_registers(marked_tracee) };
    ftrace::unregister(&FULL_OPS).unwrap();
    assert_eq!(clobbered, 0, "callee-saved registers survive the REGS trampoline");
    let seen = MARKED_SEEN.lock().clone();
    assert_eq!(seen.len(), MARKED_REGISTERS.len());
    for ((name, value), (seen_name, seen_value)) in MARKED_REGISTERS.iter().zip(seen) {
        assert_eq!((*name, Some(*value)), (seen_name, seen_value), "register {name}");
    }
    let (flags, mask, value) = MARKED_FLAGS;
    assert_eq!(FLAGS_SEEN.load(Ordering::SeqCst) & mask, value, "{flags} as set before the call");
}

/// Reads the scratch register before anything else can change it.
#[inline(never)]
extern "C" fn reads_scratch() -> u64 {
    scratch_register()
}

const SCRATCH_VALUE: u64 = 0x5c7a_7c40_0000_0017;

extern "C" fn write_scratch(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    // SAFETY: only set on `reads_scratch`, which reads the scratch register
    // first and keeps nothing in it.
    let regs = unsafe { fregs.regs_mut() }.expect("a full save");
    assert!(regs.set_register(SCRATCH_REGISTER, SCRATCH_VALUE));
}

static SCRATCH_OPS: FtraceOps = FtraceOps::new(write_scratch, OpsFlags::SAVE_REGS);

#[ktest]
fn a_callback_write_to_a_full_save_register_lands() {
    let f = address(reads_scratch as extern "C" fn() -> u64);
    trace_only(&SCRATCH_OPS, &[f]);
    let seen = reads_scratch();
    ftrace::unregister(&SCRATCH_OPS).unwrap();
    assert_eq!(seen, SCRATCH_VALUE, "{SCRATCH_REGISTER} as the callback set it");
}

// ---- the stack pointer is the trampoline's ----

const DECOY_WORD: u64 = 0xdec0_5ac4_0000_00aa;
/// Where a callback points the saved stack pointer: words nothing may write.
static DECOY_STACK: [AtomicU64; 8] = [const { AtomicU64::new(DECOY_WORD) }; 8];

fn decoy_stack_pointer() -> u64 {
    DECOY_STACK[4].as_ptr() as u64
}

/// The return address before and after the callback moved `sp`, and the
/// stack pointer the save then reports.
static MOVED_SP: spin::Mutex<Option<(Option<usize>, Option<usize>, usize)>> = spin::Mutex::new(None);

extern "C" fn move_stack_pointer(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    let before = fregs.return_address();
    // SAFETY: a write to the stack pointer, which the trampolines ignore
    // (what the test checks).
    let moved = unsafe { fregs.partial_regs_mut() }.set_register("sp", decoy_stack_pointer());
    if moved {
        *MOVED_SP.lock() = Some((before, fregs.return_address(), fregs.stack_pointer()));
    }
}

static MOVE_SP_OPS: FtraceOps = FtraceOps::new(move_stack_pointer, OpsFlags::empty());
static MOVE_SP_REGS_OPS: FtraceOps = FtraceOps::new(move_stack_pointer, OpsFlags::SAVE_REGS);

#[inline(never)]
extern "C" fn plus_one(x: u64) -> u64 {
    black_box(x + 1)
}

#[ktest]
fn a_callback_that_moves_the_saved_stack_pointer_moves_nothing() {
    let f = address(plus_one as extern "C" fn(u64) -> u64);
    for (ops, save) in [(&MOVE_SP_OPS, "ARGS"), (&MOVE_SP_REGS_OPS, "SAVE_REGS")] {
        trace_only(ops, &[f]);
        let result = plus_one(black_box(41));
        ftrace::unregister(ops).unwrap();
        assert_eq!(result, 42, "{save}: the function ran on its own stack and returned");
        let (before, after, sp) = MOVED_SP.lock().take().expect("the callback moved sp");
        assert_eq!(sp, decoy_stack_pointer() as usize, "{save}: the save holds the sp the callback wrote");
        assert!(before.is_some(), "{save}: an entry save has a return address");
        assert_eq!(after, before, "{save}: the return address is still the entry stack's");
        assert!(
            DECOY_STACK.iter().all(|word| word.load(Ordering::SeqCst) == DECOY_WORD),
            "{save}: nothing was written through the moved sp"
        );
    }
}

#[ktest]
fn args_ops_gets_no_pt_regs_and_unsaved_registers_are_refused() {
    let f = address(marked_tracee as extern "C" fn());
    trace_only(&SPARSE_OPS, &[f]);
    // SAFETY: as above.
    let clobbered = unsafe { call_with_marked_registers(marked_tracee) };
    ftrace::unregister(&SPARSE_OPS).unwrap();
    assert_eq!(clobbered, 0, "callee-saved registers survive the ARGS trampoline");
    let (has_regs, summary) = SPARSE_SEEN.lock().expect("callback ran");
    assert!(!has_regs, "an ARGS ops gets no PtRegs");
    assert_eq!(summary, PtRegsSummary { callee_saved_zero: true, sp_matches: true }, "partial_regs");

    for (name, _) in MARKED_REGISTERS {
        assert_eq!(FtraceRegs::query_register_offset(name), Err(RegisterError::NotSaved), "{name}");
    }
    assert_eq!(FtraceRegs::query_register_offset(MARKED_FLAGS.0), Err(RegisterError::NotSaved));
    assert_eq!(FtraceRegs::query_register_offset("no_such_register"), Err(RegisterError::Unknown));
    let first_argument = arch::regs::REGISTERS[0].names[0];
    let offset = FtraceRegs::query_register_offset(first_argument).expect("argument 0 is saved");
    let regs = PtRegs::default();
    let entry = SavedRegs::of(&regs, Saved::EntryArgs);
    assert_eq!(entry.register_at(offset), entry.argument(0));
    assert_eq!(SavedRegs::of(&regs, Saved::Return).register_at(offset).is_some(), arch::regs::ARGUMENT_REGISTERS == 8);
}

// ---- filters ----

#[inline(never)]
extern "C" fn glob_alpha_one() -> u64 {
    black_box(1)
}

#[inline(never)]
extern "C" fn glob_alpha_two() -> u64 {
    black_box(2)
}

#[inline(never)]
extern "C" fn glob_beta() -> u64 {
    black_box(3)
}

static GLOB_CALLS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_glob(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    GLOB_CALLS.fetch_add(1, Ordering::Relaxed);
}

static GLOB_OPS: FtraceOps = FtraceOps::new(count_glob, OpsFlags::RECURSION);

#[ktest]
fn filter_globs_notrace_and_empty_filter() {
    let one = address(glob_alpha_one as extern "C" fn() -> u64);
    let two = address(glob_alpha_two as extern "C" fn() -> u64);
    let beta = address(glob_beta as extern "C" fn() -> u64);
    let counts = || (ops_count(one), ops_count(two), ops_count(beta));
    let set = |kind, text, mode| ftrace::set_filter(&GLOB_OPS, kind, text, mode);

    set(FilterKind::Filter, "kernel::tests::ftrace::ops::glob_alpha_*", FilterMode::Replace).unwrap();
    ftrace::register(&GLOB_OPS).unwrap();
    assert_eq!(counts(), (1, 1, 0), "prefix glob");
    set(FilterKind::Filter, "*::glob_beta", FilterMode::Append).unwrap();
    assert_eq!(counts(), (1, 1, 1), "suffix glob appended");
    set(FilterKind::Filter, "!*alpha_one", FilterMode::Append).unwrap();
    assert_eq!(counts(), (0, 1, 1), "! removes");
    set(FilterKind::Filter, "*lpha_o* no_such_glob_function", FilterMode::Replace).unwrap_err();
    assert_eq!(counts(), (0, 1, 1), "a word that matches nothing changes nothing");
    set(FilterKind::Filter, "*ftrace::ops::glob*one kernel::tests::ftrace::ops::glob_beta", FilterMode::Replace).unwrap();
    assert_eq!(counts(), (1, 0, 1), "replace with a*b and an exact name");
    assert_eq!(
        ftrace::filter_names(&GLOB_OPS, FilterKind::Filter),
        ["kernel::tests::ftrace::ops::glob_alpha_one", "kernel::tests::ftrace::ops::glob_beta"]
    );

    let before = GLOB_CALLS.load(Ordering::Relaxed);
    glob_alpha_one();
    glob_alpha_two();
    glob_beta();
    assert_eq!(GLOB_CALLS.load(Ordering::Relaxed) - before, 2, "only filtered functions call back");

    set(FilterKind::Notrace, "*::glob_alpha_two", FilterMode::Replace).unwrap();
    set(FilterKind::Filter, "", FilterMode::Replace).unwrap();
    assert_eq!(counts(), (1, 0, 1), "empty filter: every function, but notrace wins");
    assert!(ops_count(address(crate::workload::fib as fn(u64) -> u64)) >= 1);

    ftrace::unregister(&GLOB_OPS).unwrap();
    set(FilterKind::Notrace, "", FilterMode::Replace).unwrap();
    assert_eq!(counts(), (0, 0, 0));
    let mut enabled = 0;
    ftrace::for_each_site(|site| enabled += site.ops_count);
    assert_eq!(enabled, 0, "no site left enabled");
}

// ---- live updates, interrupts, recursion ----

static TICK_CALLS: AtomicU64 = AtomicU64::new(0);
static TICK_IN_IRQ: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_tick(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    TICK_CALLS.fetch_add(1, Ordering::SeqCst);
    if context::current() == Context::Softirq {
        TICK_IN_IRQ.fetch_add(1, Ordering::SeqCst);
    }
}

static TICK_OPS: FtraceOps = FtraceOps::new(count_tick, OpsFlags::RECURSION);

fn wait_ticks(n: u64) {
    let start = arch::time::ticks();
    while arch::time::ticks() < start + n {
        arch::cpu::wait_for_interrupt();
    }
}

#[ktest]
fn register_and_unregister_while_interrupts_trace() {
    let f = address(crate::tick::on_tick as fn());
    let (calls_before, in_irq_before) = (TICK_CALLS.load(Ordering::SeqCst), TICK_IN_IRQ.load(Ordering::SeqCst));
    trace_only(&TICK_OPS, &[f]);
    wait_ticks(20);
    ftrace::unregister(&TICK_OPS).unwrap();
    // Read after unregistering and a grace period (a tick that entered the
    // trampoline before the unpatch finishes first): no callback runs
    // between the two reads.
    ftrace::deferred::synchronize();
    let after = TICK_CALLS.load(Ordering::SeqCst);
    let calls = after - calls_before;
    assert!(calls >= 10, "the tick hook was traced {calls} times");
    let in_irq = TICK_IN_IRQ.load(Ordering::SeqCst) - in_irq_before;
    assert_eq!(in_irq, calls, "every call in the tick's softirq-like context");
    let seen = crate::tick::seen();
    wait_ticks(10);
    assert!(crate::tick::seen() >= seen + 10, "ticks go on");
    assert_eq!(TICK_CALLS.load(Ordering::SeqCst), after, "no callbacks after unregister");
    assert_eq!(call_slot(f), NOP);
}

/// Registering, then unregistering, the tick's ops many times: every time,
/// some CPU's tick calls back within 50 ticks. A CPU that kept running a
/// copy of the site translated from its old bytes (QEMU under host load,
/// see `arch::text`) would never call back.
#[ktest]
fn every_registration_reaches_the_interrupt_path() {
    let f = address(crate::tick::on_tick as fn());
    let mut silent = 0;
    for _ in 0..150 {
        let before = TICK_CALLS.load(Ordering::SeqCst);
        trace_only(&TICK_OPS, &[f]);
        let start = arch::time::ticks();
        while TICK_CALLS.load(Ordering::SeqCst) == before && arch::time::ticks() < start + 50 {
            arch::cpu::wait_for_interrupt();
        }
        if TICK_CALLS.load(Ordering::SeqCst) == before {
            silent += 1;
        }
        ftrace::unregister(&TICK_OPS).unwrap();
    }
    assert_eq!(silent, 0, "registrations the tick never called back");
}

#[inline(never)]
extern "C" fn recursion_outer() -> u64 {
    black_box(10)
}

#[inline(never)]
extern "C" fn recursion_inner() -> u64 {
    black_box(20)
}

static RECURSION_CALLS: AtomicU64 = AtomicU64::new(0);
static INNER_ADDRESS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn calls_traced_code(ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    RECURSION_CALLS.fetch_add(1, Ordering::SeqCst);
    if ip != INNER_ADDRESS.load(Ordering::SeqCst) {
        // A callback calling a traced function: must not recurse.
        black_box(recursion_inner());
    }
}

static RECURSION_OPS: FtraceOps = FtraceOps::new(calls_traced_code, OpsFlags::RECURSION);

#[ktest]
fn recursion_is_counted_not_followed() {
    let outer = address(recursion_outer as extern "C" fn() -> u64);
    let inner = address(recursion_inner as extern "C" fn() -> u64);
    INNER_ADDRESS.store(inner, Ordering::SeqCst);
    trace_only(&RECURSION_OPS, &[outer, inner]);
    let (calls, missed) = (RECURSION_CALLS.load(Ordering::SeqCst), RECURSION_OPS.missed());
    assert_eq!(recursion_outer(), 10);
    assert_eq!(RECURSION_CALLS.load(Ordering::SeqCst) - calls, 1, "the inner call did not re-enter");
    assert_eq!(RECURSION_OPS.missed() - missed, 1, "and was counted");
    assert_eq!(recursion_inner(), 20);
    assert_eq!(RECURSION_CALLS.load(Ordering::SeqCst) - calls, 2, "a direct call is traced");
    assert_eq!(RECURSION_OPS.missed() - missed, 1);
    ftrace::unregister(&RECURSION_OPS).unwrap();
    let mut recursed = String::new();
    crate::tracefs::read("recursed_functions", &mut recursed).unwrap();
    assert!(
        recursed.contains("kernel::tests::ftrace::ops::recursion_inner:\tkernel::tests::ftrace::ops::calls_traced_code"),
        "visible in recursed_functions: {recursed}"
    );
}

#[inline(never)]
extern "C" fn shared_outer() -> u64 {
    black_box(30)
}

#[inline(never)]
extern "C" fn shared_inner() -> u64 {
    black_box(40)
}

static SHARED_FIRST_CALLS: AtomicU64 = AtomicU64::new(0);
static SHARED_SECOND_CALLS: AtomicU64 = AtomicU64::new(0);
static SHARED_INNER: AtomicUsize = AtomicUsize::new(0);

/// Counts, and from the outer function calls the inner one, which both ops
/// trace: a site of two ops, entered from inside a callback.
extern "C" fn first_calls_traced_code(ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    SHARED_FIRST_CALLS.fetch_add(1, Ordering::SeqCst);
    if ip != SHARED_INNER.load(Ordering::SeqCst) {
        black_box(shared_inner());
    }
}

extern "C" fn second_counts(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    SHARED_SECOND_CALLS.fetch_add(1, Ordering::SeqCst);
}

static SHARED_FIRST: FtraceOps = FtraceOps::new(first_calls_traced_code, OpsFlags::RECURSION);
static SHARED_SECOND: FtraceOps = FtraceOps::new(second_counts, OpsFlags::RECURSION);

/// The recursion guard of a site several ops trace (its list entry): a
/// callback's call into it is missed by every ops on it, and counted for
/// each; a direct call runs them all.
#[ktest]
fn recursion_into_a_site_of_several_ops_is_counted_for_each() {
    let outer = address(shared_outer as extern "C" fn() -> u64);
    let inner = address(shared_inner as extern "C" fn() -> u64);
    SHARED_INNER.store(inner, Ordering::SeqCst);
    trace_only(&SHARED_FIRST, &[outer, inner]);
    trace_only(&SHARED_SECOND, &[inner]);
    assert_eq!((ops_count(outer), ops_count(inner)), (1, 2), "the inner site is a list of two");
    let calls = || (SHARED_FIRST_CALLS.load(Ordering::SeqCst), SHARED_SECOND_CALLS.load(Ordering::SeqCst));
    let (calls_before, missed_before) = (calls(), (SHARED_FIRST.missed(), SHARED_SECOND.missed()));
    assert_eq!(shared_outer(), 30);
    let after_outer = (calls(), (SHARED_FIRST.missed(), SHARED_SECOND.missed()));
    assert_eq!(shared_inner(), 40);
    let after_inner = (calls(), (SHARED_FIRST.missed(), SHARED_SECOND.missed()));
    ftrace::unregister(&SHARED_SECOND).unwrap();
    ftrace::unregister(&SHARED_FIRST).unwrap();
    let delta = |(calls, missed): ((u64, u64), (u64, u64))| {
        ((calls.0 - calls_before.0, calls.1 - calls_before.1), (missed.0 - missed_before.0, missed.1 - missed_before.1))
    };
    assert_eq!(delta(after_outer), ((1, 0), (1, 1)), "the inner call from the callback ran neither ops; both counted it");
    assert_eq!(delta(after_inner), ((2, 1), (1, 1)), "a direct call runs both, misses nothing");
}

static INSIDE_RESULT: spin::Mutex<Option<Result<(), FtraceError>>> = spin::Mutex::new(None);

extern "C" fn registers_from_callback(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    *INSIDE_RESULT.lock() = Some(ftrace::register(&GLOB_OPS));
}

static REENTRANT_OPS: FtraceOps = FtraceOps::new(registers_from_callback, OpsFlags::RECURSION);

#[ktest]
fn changing_tracing_from_a_callback_is_refused() {
    let f = address(glob_beta as extern "C" fn() -> u64);
    trace_only(&REENTRANT_OPS, &[f]);
    glob_beta();
    ftrace::unregister(&REENTRANT_OPS).unwrap();
    assert_eq!(*INSIDE_RESULT.lock(), Some(Err(FtraceError::WrongContext)));
    assert!(!ftrace::is_registered(&GLOB_OPS));
}

// ---- patching safety ----

#[inline(never)]
extern "C" fn cycle_tracee() -> u64 {
    black_box(99)
}

static CYCLE_CALLS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_cycle(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    CYCLE_CALLS.fetch_add(1, Ordering::Relaxed);
}

static CYCLE_OPS: FtraceOps = FtraceOps::new(count_cycle, OpsFlags::empty());

#[ktest]
fn ten_thousand_enable_disable_cycles_leave_every_site_original() {
    let f = address(cycle_tracee as extern "C" fn() -> u64);
    ftrace::set_filter_ips(&CYCLE_OPS, FilterKind::Filter, &[f], FilterMode::Replace).unwrap();
    let before = ftrace::update_stats();
    let calls = CYCLE_CALLS.load(Ordering::Relaxed);
    for _ in 0..10_000 {
        ftrace::register(&CYCLE_OPS).unwrap();
        cycle_tracee();
        ftrace::unregister(&CYCLE_OPS).unwrap();
        cycle_tracee();
    }
    assert_eq!(CYCLE_CALLS.load(Ordering::Relaxed) - calls, 10_000, "traced exactly while enabled");
    let after = ftrace::update_stats();
    assert_eq!(after.sites_patched - before.sites_patched, 20_000, "one site changed per update");
    let mut sites = 0;
    ftrace::for_each_site(|site| {
        sites += 1;
        assert!(site.failed || call_slot(site.ip) == NOP, "{} not back to its NOP", site.name);
        for (offset, _compiled, prepared) in PREPARE {
            assert_eq!(read_text::<INSN_LEN>(site.ip + offset), *prepared, "{}", site.name);
        }
    });
    assert!(sites > 50);
}

#[inline(never)]
extern "C" fn corrupt_tracee() -> u64 {
    black_box(5)
}

static CORRUPT_CALLS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_corrupt(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    CORRUPT_CALLS.fetch_add(1, Ordering::SeqCst);
}

static CORRUPT_OPS: FtraceOps = FtraceOps::new(count_corrupt, OpsFlags::empty());

#[ktest]
fn a_corrupted_site_is_refused_with_a_report() {
    let f = address(corrupt_tracee as extern "C" fn() -> u64);
    let slot = f + CALL_OFFSET;
    TextPatcher::new().replace(slot, &NOP, &CORRUPT_INSN).expect("corrupt the site");
    let refused = ftrace::update_stats().sites_refused;

    trace_only(&CORRUPT_OPS, &[f]);
    assert_eq!(ftrace::update_stats().sites_refused, refused + 1);
    let site = ftrace::site(f).unwrap();
    assert!(site.failed, "taken out of service");
    assert!(!site.literal_names_ops, "the literal, set before the refused call, names no ops again");
    assert_eq!(call_slot(f), CORRUPT_INSN, "nothing was written over it");
    assert_eq!(corrupt_tracee(), 5);
    assert_eq!(CORRUPT_CALLS.load(Ordering::SeqCst), 0);
    let report = ftrace::last_refusal().expect("a report");
    let mut found = String::new();
    arch::text::write_bytes(&mut found, &CORRUPT_INSN).unwrap();
    let mut expected = String::new();
    arch::text::write_bytes(&mut expected, &NOP).unwrap();
    assert!(report.contains("kernel::tests::ftrace::ops::corrupt_tracee"), "{report}");
    assert!(report.contains(&alloc::format!("found{found}")), "{report}");
    assert!(report.contains(&alloc::format!("expected{expected}")), "{report}");
    assert!(report.contains("while enabling"), "{report}");
    let mut listing = String::new();
    crate::tracefs::read("available_filter_functions", &mut listing).unwrap();
    assert!(!listing.contains("corrupt_tracee"), "out of service: not offered for tracing");
    ftrace::unregister(&CORRUPT_OPS).unwrap();

    // Repair it and bring it back.
    TextPatcher::new().replace(slot, &CORRUPT_INSN, &NOP).expect("repair");
    assert!(ftrace::return_to_service(f));
    trace_only(&CORRUPT_OPS, &[f]);
    assert_eq!(corrupt_tracee(), 5);
    assert_eq!(CORRUPT_CALLS.load(Ordering::SeqCst), 1);
    ftrace::unregister(&CORRUPT_OPS).unwrap();
    assert_eq!(call_slot(f), NOP);
}

#[inline(never)]
extern "C" fn quiesced_tracee() -> u64 {
    black_box(6)
}

static QUIESCE_CALLS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_quiesce(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    QUIESCE_CALLS.fetch_add(1, Ordering::SeqCst);
}

static QUIESCE_ARGS_OPS: FtraceOps = FtraceOps::new(count_quiesce, OpsFlags::empty());
static QUIESCE_REGS_OPS: FtraceOps = FtraceOps::new(count_quiesce, OpsFlags::SAVE_REGS);

#[ktest]
fn a_site_refused_while_live_never_leads_to_an_unregistered_ops() {
    // A site whose call slot was changed behind ftrace's back to a call that
    // still works: the switch to the full-registers trampoline is refused
    // after its literal already names the new two-ops list. The site must
    // stop leading to those ops: once they are unregistered (and the list
    // freed) a call must reach neither.
    let f = address(quiesced_tracee as extern "C" fn() -> u64);
    trace_only(&QUIESCE_ARGS_OPS, &[f]);
    assert_eq!(quiesced_tracee(), 6);
    assert_eq!(QUIESCE_CALLS.load(Ordering::SeqCst), 1);
    let slot = f + CALL_OFFSET;
    let (args_call, regs_call) = (call_to(f, Trampoline::Args), call_to(f, Trampoline::Regs));
    TextPatcher::new().replace(slot, &args_call, &regs_call).expect("change the call behind ftrace's back");

    trace_only(&QUIESCE_REGS_OPS, &[f]);
    assert!(ftrace::site(f).unwrap().failed, "the switch was refused");
    assert_eq!(call_slot(f), regs_call, "the slot was left alone");
    ftrace::unregister(&QUIESCE_REGS_OPS).unwrap();
    ftrace::unregister(&QUIESCE_ARGS_OPS).unwrap();
    let calls = QUIESCE_CALLS.load(Ordering::SeqCst);
    assert_eq!(quiesced_tracee(), 6);
    assert_eq!(QUIESCE_CALLS.load(Ordering::SeqCst), calls, "no unregistered ops was called");

    TextPatcher::new().replace(slot, &regs_call, &NOP).expect("repair the slot");
    assert_eq!(quiesced_tracee(), 6);
}

#[ktest]
fn patching_refuses_mismatches_and_far_targets() {
    let f = address(corrupt_tracee as extern "C" fn() -> u64);
    let mut patcher = TextPatcher::new();
    let wrong = CORRUPT_INSN;
    let result = patcher.replace(f + CALL_OFFSET, &wrong, &NOP);
    assert!(matches!(result, Err(arch::text::PatchError::Mismatch { .. })), "{result:?}");
    assert!(matches!(patcher.replace(0x10, &NOP, &NOP), Err(arch::text::PatchError::NotText { .. })));
    // Too long, and two widths at one address: refused, not a panic.
    let long = [0u8; arch::text::MAX_PATCH + 1];
    assert!(matches!(patcher.replace(f, &long, &long), Err(arch::text::PatchError::BadLength { .. })));
    patcher.replace(f + CALL_OFFSET, &NOP, &NOP).unwrap();
    let half = &NOP[..NOP.len() / 2];
    assert!(matches!(patcher.replace(f + CALL_OFFSET, half, half), Err(arch::text::PatchError::BadLength { .. })));
    drop(patcher);
    assert_eq!(call_slot(f), NOP, "a refused patch writes nothing");
    assert!(call_insn(f, f + (1 << 33)).is_err(), "a call target out of reach is refused");
    assert!(call_insn(f, trampoline_address(Trampoline::Args)).is_ok());
}

// ---- ftrace_enabled and PERMANENT ----

extern "C" fn nothing(_ip: usize, _parent: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {}

static PERMANENT_OPS: FtraceOps = FtraceOps::new(nothing, OpsFlags::PERMANENT);
static PLAIN_OPS: FtraceOps = FtraceOps::new(nothing, OpsFlags::empty());

#[ktest]
fn ftrace_enabled_and_permanent_ops() {
    let f = address(glob_beta as extern "C" fn() -> u64);
    trace_only(&PERMANENT_OPS, &[f]);
    assert_eq!(ftrace::set_enabled(false), Err(FtraceError::PermanentOpsRegistered));
    assert!(ftrace::is_enabled());
    ftrace::unregister(&PERMANENT_OPS).unwrap();

    ftrace::set_enabled(false).unwrap();
    assert_eq!(ftrace::register(&PERMANENT_OPS), Err(FtraceError::TracingDisabled));
    trace_only(&PLAIN_OPS, &[f]);
    assert_eq!(call_slot(f), NOP, "registered, but tracing is off");
    ftrace::set_enabled(true).unwrap();
    assert_eq!(call_slot(f), call_to(f, Trampoline::Args), "on again");
    ftrace::unregister(&PLAIN_OPS).unwrap();
}

// ---- tables, symbols, the function tracer ----

#[ktest]
fn boot_checked_the_symbol_and_site_tables() {
    let table = ftrace::symbols::kernel::table().expect("symbol table present");
    assert!(table.len() > 100);
    let fib = address(crate::workload::fib as fn(u64) -> u64);
    let symbol = table.by_name("kernel::workload::fib").expect("fib by name");
    assert_eq!(symbol.address, fib);
    assert_eq!(table.lookup(fib + 4).unwrap().name, "kernel::workload::fib");
    let mut previous = 0;
    ftrace::for_each_site(|site| {
        assert!(site.ip > previous, "sites sorted");
        previous = site.ip;
        assert_eq!(table.at(site.ip).map(|s| s.name), Some(site.name), "each site starts a function");
    });
    assert_eq!(ftrace::site(fib).unwrap().name, "kernel::workload::fib");
    let mut text = String::new();
    ftrace::symbols::kernel::write_address(&mut text, fib + 0x10).unwrap();
    assert!(text.starts_with("kernel::workload::fib+0x10/0x"), "{text}");
}

#[inline(never)]
fn named_outer() -> String {
    black_box(named_inner())
}

#[inline(never)]
fn named_inner() -> String {
    let mut text = String::new();
    crate::backtrace::write_frames(&mut text, &crate::backtrace::capture());
    text
}

#[ktest]
fn backtraces_name_their_functions() {
    let text = named_outer();
    assert!(text.contains(" kernel::tests::ftrace::ops::named_inner+0x"), "{text}");
    assert!(text.contains(" kernel::tests::ftrace::ops::named_outer+0x"), "{text}");
    assert!(text.contains(" kernel::tests::ftrace::ops::backtraces_name_their_functions+0x"), "{text}");
}

#[ktest]
fn the_trampolines_are_named_in_backtraces() {
    use arch::ftrace_abi::{return_trampoline_address, trampoline_address, ReturnTrampoline, Trampoline};
    // The assembly gives its entry points a type and a size, so the symbol
    // table has them: a callback's or a return's backtrace names them.
    for (address, name) in [
        (trampoline_address(Trampoline::Args), "ftrace_caller"),
        (trampoline_address(Trampoline::Regs), "ftrace_regs_caller"),
        (return_trampoline_address(ReturnTrampoline::Sparse), "return_to_handler"),
        (return_trampoline_address(ReturnTrampoline::Full), "return_to_handler_regs"),
    ] {
        assert_eq!(ftrace::symbols::kernel::name_of(address), Some(name));
        assert_eq!(ftrace::symbols::kernel::name_of(address + 8), Some(name), "sized: its body is inside it");
    }
    // A return address right after a call that ends its function (one that
    // never returns) names that function, not the next one.
    let table = ftrace::symbols::kernel::table().unwrap();
    let caller = table.by_name("ftrace_caller").unwrap();
    let mut text = String::new();
    ftrace::symbols::kernel::write_return_address(&mut text, caller.address + caller.size).unwrap();
    assert_eq!(text, alloc::format!("ftrace_caller+{:#x}/{:#x}", caller.size, caller.size));
    // After the exception entry's call into its handler a frame is the
    // interrupted pc, named as it is: a function's first instruction is
    // that function's, not the end of the one before it.
    let fib = table.by_name("kernel::workload::fib").unwrap();
    let frame_after = |inner| {
        let mut text = String::new();
        ftrace::symbols::kernel::write_frame_after(&mut text, fib.address, inner).unwrap();
        text
    };
    assert_eq!(frame_after(arch::exceptions::handler_return()), alloc::format!("kernel::workload::fib+0x0/{:#x}", fib.size));
    assert!(!frame_after(fib.address + 16).starts_with("kernel::workload::fib+"), "a return address: the byte before");
}

fn fib_events() -> Vec<(usize, usize)> {
    crate::tests::recorded_events()
        .iter()
        .filter_map(|(_, payload)| trace::events::record::FunctionEvent::decode(payload))
        .map(|event| (event.ip as usize, event.parent_ip as usize))
        .collect()
}

#[ktest]
fn function_tracer_records_every_fib_call() {
    use crate::tracefs::{self, TracefsError};
    let fib = address(crate::workload::fib as fn(u64) -> u64);
    tracefs::write("set_ftrace_filter", "*::fib", FilterMode::Replace).unwrap();
    tracefs::write("current_tracer", "function", FilterMode::Replace).unwrap();
    crate::workload::run("fib", &["5"]).unwrap();
    let events = fib_events();
    tracefs::write("current_tracer", "nop", FilterMode::Replace).unwrap();

    assert_eq!(events.len(), 15, "fib(5) is 15 calls");
    assert!(events.iter().all(|&(ip, _)| ip == fib));
    assert_eq!(ftrace::symbols::kernel::name_of(events[0].1), Some("kernel::workload::run"));
    assert!(events[1..].iter().all(|&(_, parent)| ftrace::symbols::kernel::name_of(parent) == Some("kernel::workload::fib")));
    let mut trace = String::new();
    tracefs::read("trace", &mut trace).unwrap();
    assert!(trace.starts_with("# tracer: nop"));
    assert_eq!(fib_events().len(), 0, "changing the tracer empties the buffer");
    let mut enabled = String::new();
    tracefs::read("enabled_functions", &mut enabled).unwrap();
    assert_eq!(enabled, "", "nothing enabled after nop");

    // Bad input: an error, and nothing changes.
    assert!(matches!(tracefs::write("current_tracer", "bogus", FilterMode::Replace), Err(TracefsError::Invalid(_))));
    assert_eq!(trace::array::instances::top().current_tracer().name(), "nop");
    assert!(tracefs::write("set_ftrace_filter", "no_such_function_*", FilterMode::Replace).is_err());
    assert_eq!(trace::array::instances::top().tracer_filter_names(FilterKind::Filter), ["kernel::workload::fib"]);
    assert!(matches!(tracefs::write("tracing_on", "on", FilterMode::Replace), Err(TracefsError::Invalid(_))));
    assert!(matches!(tracefs::write("trace_nope", "1", FilterMode::Replace), Err(TracefsError::NoSuchFile(_))));
    assert!(matches!(tracefs::write("enabled_functions", "1", FilterMode::Replace), Err(TracefsError::NotWritable(_))));
    tracefs::write("set_ftrace_filter", "", FilterMode::Replace).unwrap();
}

#[ktest]
fn tracing_on_gates_recording() {
    use crate::tracefs;
    tracefs::write("set_ftrace_filter", "*::fib", FilterMode::Replace).unwrap();
    tracefs::write("current_tracer", "function", FilterMode::Replace).unwrap();
    tracefs::write("tracing_on", "0", FilterMode::Replace).unwrap();
    crate::workload::fib(black_box(3));
    assert_eq!(fib_events().len(), 0, "nothing recorded while tracing_on is 0");
    tracefs::write("tracing_on", "2", FilterMode::Replace).unwrap();
    crate::workload::fib(black_box(3));
    assert_eq!(fib_events().len(), 5, "any number but 0 is on, as in Linux");
    tracefs::write("trace", "", FilterMode::Append).unwrap();
    assert_eq!(fib_events().len(), 5, "echo >> trace truncates nothing");
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
    assert_eq!(fib_events().len(), 0, "echo > trace empties the buffer");
    tracefs::write("current_tracer", "nop", FilterMode::Replace).unwrap();
    tracefs::write("set_ftrace_filter", "", FilterMode::Replace).unwrap();
}
