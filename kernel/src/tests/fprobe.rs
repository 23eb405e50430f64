//! fprobe: entry and exit probes on the sparse FtraceRegs, and dynamic events.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering};

use fprobe::{EntryData, Fprobe, FprobeConfig, FprobeError, RegisteredFprobe, Target};
use ftrace::symbols::table::NameError;
use ftrace::{FilterMode, FtraceRegs, Trampoline};
use ktest_macros::ktest;

use crate::tracefs;

fn address<T: Copy>(f: T) -> usize {
    // SAFETY: only used on function pointers, which are pointer-sized.
    unsafe { core::mem::transmute_copy::<T, usize>(&f) }
}

fn config(entry: Option<fprobe::EntryHandler>, exit: Option<fprobe::ExitHandler>) -> FprobeConfig {
    FprobeConfig { entry, exit, entry_data_words: 0, save_args: false, private: 0, free_private: None }
}

/// Changes its argument register before returning.
#[inline(never)]
extern "C" fn probed(a: u64, b: u64) -> u64 {
    black_box(a.wrapping_mul(b) + 1)
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Call {
    entry_ip: usize,
    ret_ip: usize,
    a: u64,
    b: u64,
    retval: u64,
}

static ENTRIES: spin::Mutex<Vec<Call>> = spin::Mutex::new(Vec::new());
static EXITS: spin::Mutex<Vec<Call>> = spin::Mutex::new(Vec::new());

fn record_entry(_fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    let (a, b) = (fregs.argument(0).unwrap(), fregs.argument(1).unwrap());
    ENTRIES.lock().push(Call { entry_ip, ret_ip, a, b, retval: 0 });
    false
}

fn record_exit(_fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) {
    let (a, b) = (data.argument(0).unwrap_or(u64::MAX), data.argument(1).unwrap_or(u64::MAX));
    EXITS.lock().push(Call { entry_ip, ret_ip, a, b, retval: fregs.return_value() });
}

#[ktest]
fn entry_and_exit_handlers_see_ips_arguments_and_return_values() {
    let f = address(probed as extern "C" fn(u64, u64) -> u64);
    let probe = fprobe::register(
        FprobeConfig { save_args: true, ..config(Some(record_entry), Some(record_exit)) },
        Target::Addresses(&[f]),
    )
    .unwrap();
    assert_eq!(ftrace::site(f).unwrap().trampoline, Some(Trampoline::Args), "fprobes stay on the ARGS trampoline");
    assert_eq!(probed(black_box(6), black_box(7)), 43);
    probe.unregister().unwrap();
    let entry = ENTRIES.lock().pop().expect("entry handler ran");
    let exit = EXITS.lock().pop().expect("exit handler ran");
    assert_eq!((entry.entry_ip, entry.a, entry.b), (f, 6, 7));
    let caller = "kernel::tests::fprobe::entry_and_exit_handlers_see_ips_arguments_and_return_values";
    assert_eq!(ftrace::symbols::kernel::name_of(entry.ret_ip), Some(caller));
    assert_eq!(exit, Call { entry_ip: f, ret_ip: entry.ret_ip, a: 6, b: 7, retval: 43 }, "exit: entry args and the return value");
}

static DATA_EXITS: AtomicU64 = AtomicU64::new(0);
static DATA_OK: AtomicU64 = AtomicU64::new(0);

fn fill_entry_data(_fp: &Fprobe, _ip: usize, _ret: usize, fregs: &mut FtraceRegs, data: &mut EntryData) -> bool {
    let a = fregs.argument(0).unwrap();
    for (i, word) in data.words().iter_mut().enumerate() {
        *word = a * 100 + i as u64;
    }
    a % 2 == 1 // odd arguments skip the exit handler
}

fn check_entry_data(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, data: &mut EntryData) {
    DATA_EXITS.fetch_add(1, Ordering::SeqCst);
    let words = data.words();
    let a = words[0] / 100;
    if words.len() == fprobe::MAX_ENTRY_DATA_WORDS && words.iter().enumerate().all(|(i, w)| *w == a * 100 + i as u64) {
        DATA_OK.fetch_add(1, Ordering::SeqCst);
    }
}

#[ktest]
fn entry_data_round_trips_and_skip_exit_skips() {
    let f = address(probed as extern "C" fn(u64, u64) -> u64);
    let with_data = |words| FprobeConfig { entry_data_words: words, ..config(Some(fill_entry_data), Some(check_entry_data)) };
    assert_eq!(
        fprobe::register(with_data(fprobe::MAX_ENTRY_DATA_WORDS + 1), Target::Addresses(&[f])).err(),
        Some(FprobeError::EntryDataTooLarge(16))
    );
    assert_eq!(ftrace::site(f).unwrap().ops_count, 0, "a refused probe registers nothing");
    let probe = fprobe::register(with_data(fprobe::MAX_ENTRY_DATA_WORDS), Target::Addresses(&[f])).unwrap();
    for a in 2..8 {
        probed(black_box(a), 1);
    }
    drop(probe);
    assert_eq!(DATA_EXITS.load(Ordering::SeqCst), 3, "only even arguments reached the exit handler");
    assert_eq!(DATA_OK.load(Ordering::SeqCst), 3, "each saw its own 15 words");
}

static ENTRY_ONLY_WORDS: AtomicU64 = AtomicU64::new(u64::MAX);

fn note_words(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, data: &mut EntryData) -> bool {
    ENTRY_ONLY_WORDS.store(data.words().len() as u64, Ordering::SeqCst);
    false
}

#[ktest]
fn a_probe_without_an_exit_handler_keeps_no_entry_data() {
    // As in Linux, where such a probe's entry data is NULL: the words exist
    // to carry something from a call's entry to its exit.
    let f = address(probed as extern "C" fn(u64, u64) -> u64);
    let probe = fprobe::register(
        FprobeConfig { entry_data_words: fprobe::MAX_ENTRY_DATA_WORDS, save_args: true, ..config(Some(note_words), None) },
        Target::Addresses(&[f]),
    )
    .unwrap();
    probed(black_box(2), 3);
    drop(probe);
    assert_eq!(ENTRY_ONLY_WORDS.load(Ordering::SeqCst), 0);
}

static MASS_CALLS: AtomicU64 = AtomicU64::new(0);

fn count(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    MASS_CALLS.fetch_add(1, Ordering::Relaxed);
    false
}

static SINGLE_CALLS: AtomicU64 = AtomicU64::new(0);

fn count_single(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    SINGLE_CALLS.fetch_add(1, Ordering::Relaxed);
    false
}

#[ktest]
fn mass_attach_by_glob_stays_on_args_and_one_probe_is_still_direct() {
    let probed_ip = address(probed as extern "C" fn(u64, u64) -> u64);
    let mass = fprobe::register(
        config(Some(count), None),
        Target::Glob { filter: "kernel::*", exclude: Some("kernel::testing::* kernel::tests::fprobe::probed") },
    )
    .unwrap();
    let single = fprobe::register(config(Some(count_single), None), Target::Addresses(&[probed_ip])).unwrap();
    let (mut probed_sites, mut regs_sites) = (0, 0);
    ftrace::for_each_site(|site| {
        if site.ops_count > 0 {
            probed_sites += 1;
            regs_sites += usize::from(site.trampoline == Some(Trampoline::Regs));
        }
    });
    assert!(probed_sites >= 200, "hundreds of functions in one registration: {probed_sites}");
    assert_eq!(regs_sites, 0, "no fprobe moves a site to the REGS trampoline");
    let literal = u64::from_ne_bytes({
        let mut bytes = [0; 8];
        arch::text::read(probed_ip - 8, &mut bytes).unwrap();
        bytes
    });
    assert_eq!(literal, single.ops() as *const ftrace::FtraceOps as u64, "a function with one probe reaches it directly");
    let before = MASS_CALLS.load(Ordering::Relaxed);
    crate::workload::fs::run();
    probed(1, 2);
    assert!(MASS_CALLS.load(Ordering::Relaxed) - before >= 10, "the fs workload hit the mass probe");
    assert_eq!(SINGLE_CALLS.load(Ordering::Relaxed), 1);
    drop(single);
    drop(mass);
    let mut left = 0;
    ftrace::for_each_site(|site| left += site.ops_count);
    assert_eq!(left, 0, "unregistering restores every site");
}

static FIRST: AtomicU64 = AtomicU64::new(0);
static SECOND: AtomicU64 = AtomicU64::new(0);

fn first(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    FIRST.fetch_add(1, Ordering::SeqCst);
    false
}

fn second_exit(_fp: &Fprobe, _ip: usize, _ret: usize, fregs: &mut FtraceRegs, _data: &mut EntryData) {
    SECOND.fetch_add(fregs.return_value(), Ordering::SeqCst);
}

#[ktest]
fn two_fprobes_on_one_function_and_disable_enable() {
    let f = address(probed as extern "C" fn(u64, u64) -> u64);
    let one = fprobe::register(config(Some(first), None), Target::Symbols(&["kernel::tests::fprobe::probed"])).unwrap();
    let two = fprobe::register(config(None, Some(second_exit)), Target::Addresses(&[f])).unwrap();
    assert_eq!(ftrace::site(f).unwrap().ops_count, 2);
    probed(2, 3);
    assert_eq!((FIRST.load(Ordering::SeqCst), SECOND.load(Ordering::SeqCst)), (1, 7));
    one.disable();
    probed(2, 3);
    assert_eq!((FIRST.load(Ordering::SeqCst), SECOND.load(Ordering::SeqCst)), (1, 14), "a disabled probe is skipped");
    one.enable();
    probed(2, 3);
    assert_eq!(FIRST.load(Ordering::SeqCst), 2);
    assert!(matches!(
        fprobe::register(config(Some(first), None), Target::Symbols(&["no_such_symbol"])),
        Err(FprobeError::Name(NameError::Unknown(_)))
    ));
    // A bare name that ends several paths is refused, naming them.
    let Err(FprobeError::Name(NameError::Ambiguous { matches, .. })) =
        fprobe::register(config(Some(first), None), Target::Symbols(&["run"]))
    else {
        panic!("'run' is ambiguous")
    };
    assert!(matches.iter().any(|name| name == "kernel::workload::run"), "{matches:?}");
    assert!(matches.len() >= 2);
    assert!(fprobe::register(config(None, None), Target::Addresses(&[f])).is_err(), "a probe needs a handler");
    let cancelled = Target::Glob { filter: "kernel::tests::fprobe::probed !kernel::tests::fprobe::probed", exclude: None };
    assert_eq!(
        fprobe::register(config(Some(first), None), cancelled).err(),
        Some(FprobeError::NothingToProbe),
        "a pattern that takes back what it adds selects nothing, not everything"
    );
    drop((one, two));
}

/// Called by [`tail_caller`] as its last act: a tail call (a `jmp`/`b`
/// into it, the caller's frame gone), with optimisation on.
#[inline(never)]
extern "C" fn tail_callee(n: u64) -> u64 {
    if CAPTURE_IN_CALLEE.load(Ordering::SeqCst) {
        *CALLEE_BACKTRACE.lock() = crate::backtrace::capture();
    }
    black_box(n) + 1
}

static CAPTURE_IN_CALLEE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
static CALLEE_BACKTRACE: spin::Mutex<Vec<usize>> = spin::Mutex::new(Vec::new());

#[inline(never)]
extern "C" fn tail_caller(n: u64) -> u64 {
    tail_callee(n)
}

/// Calls `tail_caller`: where both calls really return to.
#[inline(never)]
fn calls_tail_caller() -> u64 {
    black_box(tail_caller(black_box(4)))
}

static TAIL_RETURNS: spin::Mutex<Vec<(usize, usize)>> = spin::Mutex::new(Vec::new());

fn record_tail_return(_fp: &Fprobe, entry_ip: usize, ret_ip: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) {
    TAIL_RETURNS.lock().push((entry_ip, ret_ip));
}

/// A function tail-called by a hooked one finds the return trampoline as
/// its return address; its exit handler is still told the real one (the
/// hooked caller's), as Linux's `correct_ret_addr` does.
#[ktest]
fn a_tail_called_functions_exit_sees_its_real_return_address() {
    let (caller, callee) = (address(tail_caller as extern "C" fn(u64) -> u64), address(tail_callee as extern "C" fn(u64) -> u64));
    TAIL_RETURNS.lock().clear();
    let probe = fprobe::register(config(None, Some(record_tail_return)), Target::Addresses(&[caller, callee])).unwrap();
    CAPTURE_IN_CALLEE.store(true, Ordering::SeqCst);
    assert_eq!(calls_tail_caller(), 5);
    CAPTURE_IN_CALLEE.store(false, Ordering::SeqCst);
    drop(probe);
    // A backtrace taken inside the callee names the real caller where the
    // frame record holds the trampoline (the callee's hooked frame, which
    // shares the caller's frame pointer, is stepped over).
    let backtrace = CALLEE_BACKTRACE.lock().clone();
    let names: Vec<&str> =
        backtrace.iter().map(|&address| ftrace::symbols::kernel::name_of(address - 1).unwrap_or("?")).collect();
    assert!(backtrace.iter().all(|&address| !ftrace::graph::retstack::is_return_trampoline(address)), "{names:?}");
    assert!(names.contains(&"kernel::tests::fprobe::calls_tail_caller"), "{names:?}");
    let returns = TAIL_RETURNS.lock().clone();
    let name = |address: usize| ftrace::symbols::kernel::name_of(address).unwrap_or("?");
    assert_eq!(returns.len(), 2, "{returns:x?}");
    // The callee returns first (its frame is the inner one), then the caller.
    assert_eq!((returns[0].0, returns[1].0), (callee, caller));
    for (_, ret) in &returns {
        assert_eq!(name(*ret), "kernel::tests::fprobe::calls_tail_caller", "{returns:x?}: the caller's caller, no trampoline");
    }
    assert_eq!(returns[0].1, returns[1].1);
}

static PARTIAL: spin::Mutex<Option<(u64, u64, bool)>> = spin::Mutex::new(None);

fn take_partial_regs(_fp: &Fprobe, _ip: usize, _ret: usize, fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    let regs = fregs.partial_regs();
    let first = arch::regs::REGISTERS[0].names[0];
    let second = arch::regs::REGISTERS[1].names[0];
    let callee_saved_zero = arch::selftest::MARKED_REGISTERS.iter().all(|(name, _)| regs.register(name) == Some(0));
    *PARTIAL.lock() = Some((regs.register(first).unwrap(), regs.register(second).unwrap(), callee_saved_zero));
    false
}

fn rewrite_second_argument(_fp: &Fprobe, _ip: usize, _ret: usize, fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    let second = arch::regs::REGISTERS[1].names[0];
    // SAFETY: the probed function takes any u64 as its second argument.
    let regs = unsafe { fregs.partial_regs_mut() };
    let value = regs.register(second).unwrap();
    assert!(regs.set_register(second, value * 100));
    false
}

#[ktest]
fn writes_through_partial_regs_land() {
    let f = address(probed as extern "C" fn(u64, u64) -> u64);
    let expected = probed(black_box(3), black_box(400));
    let probe = fprobe::register(config(Some(rewrite_second_argument), None), Target::Addresses(&[f])).unwrap();
    let seen = probed(black_box(3), black_box(4));
    drop(probe);
    assert_eq!(seen, expected, "the function got the argument the handler wrote");
}

#[ktest]
fn partial_regs_for_consumers_that_insist_on_pt_regs() {
    let f = address(probed as extern "C" fn(u64, u64) -> u64);
    let probe = fprobe::register(config(Some(take_partial_regs), None), Target::Addresses(&[f])).unwrap();
    probed(black_box(11), black_box(12));
    drop(probe);
    assert_eq!(*PARTIAL.lock(), Some((11, 12, true)), "arguments in place, unsaved registers zero");
}

fn calls_probed_code(_fp: &Fprobe, ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    if ip != address(probed as extern "C" fn(u64, u64) -> u64) {
        black_box(probed(1, 1)); // probed code from a handler: must not recurse
    }
    false
}

#[inline(never)]
extern "C" fn shared_probe_outer() -> u64 {
    black_box(50)
}

#[inline(never)]
extern "C" fn shared_probe_inner() -> u64 {
    black_box(60)
}

fn calls_the_shared_inner(_fp: &Fprobe, ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    if ip == address(shared_probe_outer as extern "C" fn() -> u64) {
        black_box(shared_probe_inner());
    }
    false
}

/// An fprobe and the function tracer on one site (a list of two ops): the
/// probe handler's call into it is missed by both, counted in the probe's
/// `nmissed` and named in `recursed_functions`, and the tracer records only
/// the direct call.
#[ktest]
fn recursion_into_a_site_an_fprobe_shares_with_the_tracer_is_counted() {
    let outer = address(shared_probe_outer as extern "C" fn() -> u64);
    let inner = address(shared_probe_inner as extern "C" fn() -> u64);
    let inner_name = ftrace::symbols::kernel::name_of(inner).unwrap();
    tracefs::write("set_ftrace_filter", inner_name, FilterMode::Replace).unwrap();
    tracefs::write("current_tracer", "function", FilterMode::Replace).unwrap();
    let probe = fprobe::register(config(Some(calls_the_shared_inner), None), Target::Addresses(&[outer, inner])).unwrap();
    let ops_on_inner = ftrace::site(inner).unwrap().ops_count;
    assert_eq!(shared_probe_outer(), 50);
    let missed_from_the_handler = probe.nmissed();
    assert_eq!(shared_probe_inner(), 60);
    let missed_after_a_direct_call = probe.nmissed();
    drop(probe);
    let trace = trace_text();
    tracefs::write("current_tracer", "nop", FilterMode::Replace).unwrap();
    tracefs::write("set_ftrace_filter", "", FilterMode::Replace).unwrap();
    let mut recursed = String::new();
    tracefs::read("recursed_functions", &mut recursed).unwrap();
    assert_eq!(ops_on_inner, 2, "the tracer and the probe share the inner site");
    assert_eq!(missed_from_the_handler, 1, "the handler's call into the shared site was missed and counted");
    assert_eq!(missed_after_a_direct_call, 1, "a direct call misses nothing");
    let traced = trace.lines().filter(|line| line.contains(&alloc::format!(": {inner_name} <-"))).count();
    assert_eq!(traced, 1, "the tracer recorded the direct call alone:\n{trace}");
    assert!(recursed.contains(&alloc::format!("{inner_name}:\t")), "named in recursed_functions: {recursed}");
}

#[inline(never)]
extern "C" fn exit_handler_callee() -> u64 {
    black_box(70)
}

static CALLEE_ENTRIES: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_callee(_ip: usize, _parent: usize, _ops: &ftrace::FtraceOps, _fregs: &mut FtraceRegs) {
    CALLEE_ENTRIES.fetch_add(1, Ordering::SeqCst);
}

static CALLEE_OPS: ftrace::FtraceOps = ftrace::FtraceOps::new(count_callee, ftrace::OpsFlags::RECURSION);

fn exit_calls_the_callee(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) {
    black_box(exit_handler_callee());
}

/// A traced function called from an exit handler: inside a return
/// callback no entry callback starts (the recursion guard's return bit
/// blocks it as the entry bit does), and the miss is counted by the ops it
/// would have run; called directly, it is traced.
#[ktest]
fn an_exit_handler_calling_traced_code_is_not_followed() {
    let outer = address(glob_target as fn() -> u64);
    let callee = address(exit_handler_callee as extern "C" fn() -> u64);
    ftrace::set_filter_ips(&CALLEE_OPS, ftrace::FilterKind::Filter, &[callee], FilterMode::Replace).unwrap();
    ftrace::register(&CALLEE_OPS).unwrap();
    let probe = fprobe::register(config(None, Some(exit_calls_the_callee)), Target::Addresses(&[outer])).unwrap();
    let (entries, missed) = (CALLEE_ENTRIES.load(Ordering::SeqCst), CALLEE_OPS.missed());
    glob_target();
    let from_the_handler = (CALLEE_ENTRIES.load(Ordering::SeqCst) - entries, CALLEE_OPS.missed() - missed);
    assert_eq!(exit_handler_callee(), 70);
    let direct = (CALLEE_ENTRIES.load(Ordering::SeqCst) - entries, CALLEE_OPS.missed() - missed);
    drop(probe);
    ftrace::unregister(&CALLEE_OPS).unwrap();
    assert_eq!(from_the_handler, (0, 1), "the call from the exit handler ran no entry callback, and was counted");
    assert_eq!(direct, (1, 1), "a direct call is traced");
}

#[inline(never)]
fn deep_probed(n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    black_box(deep_probed(black_box(n - 1))) + 1
}

#[ktest]
fn nmissed_counts_recursion_and_a_full_return_stack() {
    let f = address(probed as extern "C" fn(u64, u64) -> u64);
    let g = address(glob_target as fn() -> u64);
    let probe = fprobe::register(config(Some(calls_probed_code), None), Target::Addresses(&[f, g])).unwrap();
    glob_target();
    assert_eq!(probe.nmissed(), 1, "the handler's call into probed code was missed, not followed");
    drop(probe);

    let deep = Target::Addresses(&[address(deep_probed as fn(u64) -> u64)]);
    let (entries, exits) = (DEEP_ENTRIES.load(Ordering::SeqCst), DEEP_EXITS.load(Ordering::SeqCst));
    let probe = fprobe::register(config(Some(count_deep_entry), Some(count_deep_exit)), deep).unwrap();
    assert_eq!(deep_probed(black_box(1000)), 1000);
    assert!(probe.nmissed() > 0, "return-hook storage ran out and was counted");
    let entries = DEEP_ENTRIES.load(Ordering::SeqCst) - entries;
    assert_eq!(DEEP_EXITS.load(Ordering::SeqCst) - exits, entries, "every entry the handler saw got its exit");
    assert_eq!(entries + probe.nmissed(), 1001, "probed or missed, never half");
    assert!(!probe.in_flight());
    drop(probe);
    assert_eq!(ftrace::graph::retstack::frames(), 0);
}

static DEEP_ENTRIES: AtomicU64 = AtomicU64::new(0);
static DEEP_EXITS: AtomicU64 = AtomicU64::new(0);

fn count_deep_entry(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    DEEP_ENTRIES.fetch_add(1, Ordering::SeqCst);
    false
}

fn count_deep_exit(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) {
    DEEP_EXITS.fetch_add(1, Ordering::SeqCst);
}

#[inline(never)]
fn glob_target() -> u64 {
    black_box(5)
}

static TICK_EXITS: AtomicU64 = AtomicU64::new(0);

fn tick_exit(_fp: &Fprobe, _ip: usize, _ret: usize, _fregs: &mut FtraceRegs, _data: &mut EntryData) {
    TICK_EXITS.fetch_add(1, Ordering::SeqCst);
}

#[ktest]
fn register_and_unregister_while_interrupts_probe() {
    let tick = address(crate::tick::on_tick as fn());
    let probe: RegisteredFprobe = fprobe::register(config(None, Some(tick_exit)), Target::Addresses(&[tick])).unwrap();
    let start = arch::time::ticks();
    while arch::time::ticks() < start + 10 {
        arch::cpu::wait_for_interrupt();
    }
    let missed = probe.nmissed();
    probe.unregister().unwrap();
    // A tick another CPU is inside may still return through the probe:
    // once the grace period is over, none is.
    ftrace::deferred::synchronize();
    let seen = TICK_EXITS.load(Ordering::SeqCst);
    assert!(
        seen >= 9,
        "{seen} interrupt exits probed ({missed} missed, hook stopped: {})",
        ftrace::graph::retstack::is_stopped()
    );
    let start = arch::time::ticks();
    while arch::time::ticks() < start + 5 {
        arch::cpu::wait_for_interrupt();
    }
    assert_eq!(TICK_EXITS.load(Ordering::SeqCst), seen, "nothing after unregistering");
}

// ---- dynamic events ----

#[repr(C)]
struct Sample {
    name: [u8; 8],
    value: u32,
    small: i16,
}

/// An event tracee: a record pointer, a bad pointer, a code address.
#[inline(never)]
extern "C" fn event_tracee(sample: *const Sample, bad: usize, code: usize, n: u64) -> u64 {
    black_box((sample as usize) ^ bad ^ code) as u64 + n
}

fn define(line: &str) -> Result<(), tracefs::TracefsError> {
    tracefs::write("dynamic_events", line, FilterMode::Append)
}

fn trace_text() -> String {
    let mut text = String::new();
    tracefs::read("trace", &mut text).unwrap();
    text
}

fn dynamic_events() -> String {
    let mut text = String::new();
    tracefs::read("dynamic_events", &mut text).unwrap();
    text
}

#[ktest]
fn every_fetch_arg_syntax_in_entry_and_exit_events() {
    let first_register = arch::ftrace_abi::ARGUMENT_NAMES[0];
    let entry = alloc::format!(
        "f:tests/probe_entry kernel::tests::fprobe::event_tracee name=+0($arg1):string value=+8($arg1):u32 \
         small=+12($arg1):s16 byte=+0($arg1):x8 bad=+0($arg2):u64 sym=$arg3:symbol ss=$arg3:symstr n=$arg4:u16 \
         reg=%{first_register} sp=$stack top=$stack0 s8=+12($arg1):s8 u64=$arg4:u64 c=+1($arg1):char \
         bits=+8($arg1):b4@4/16 flag=$arg4:b1@1/8"
    );
    define(&entry).unwrap();
    define("f:tests/probe_exit kernel::tests::fprobe::event_tracee%return n=$arg4:s32 ret=$retval:x32 r=+8($arg1):u8").unwrap();
    let listing = dynamic_events();
    assert!(listing.contains("f:tests/probe_entry kernel::tests::fprobe::event_tracee name=+0($arg1):string"), "{listing}");
    assert!(listing.contains("f:tests/probe_exit kernel::tests::fprobe::event_tracee%return n=$arg4:s32"), "{listing}");
    tracefs::write("events/tests/probe_entry/enable", "1", FilterMode::Replace).unwrap();
    tracefs::write("events/tests/probe_exit/enable", "1", FilterMode::Replace).unwrap();
    tracefs::write("trace", "", FilterMode::Replace).unwrap();

    let sample = Sample { name: *b"sample\0\0", value: 0xbeef, small: -3 };
    let fib = address(crate::workload::fib as fn(u64) -> u64);
    let bad = arch::mm::UNMAPPED_ADDRESS;
    // Opaque arguments: a call site with constants would let the compiler
    // propagate them into the function and drop the parameters.
    let result = event_tracee(black_box(&sample), black_box(bad), black_box(fib), black_box(42));
    tracefs::write("events/tests/probe_entry/enable", "0", FilterMode::Replace).unwrap();
    tracefs::write("events/tests/probe_exit/enable", "0", FilterMode::Replace).unwrap();
    let trace = trace_text();
    let mut format = String::new();
    tracefs::read("events/tests/probe_entry/format", &mut format).unwrap();
    for field in [
        "\tfield:__data_loc char[] ss;\t",
        "\tfield:u8 c;\t",
        "\tfield:u16 bits;\t",
        "\tfield:u8 flag;\t",
        " c='%c' bits=%u flag=%u\"",
    ] {
        assert!(format.contains(field), "{field:?} not in {format}");
    }
    define("-:tests/probe_entry").unwrap();
    // A removal with more words removes only an event whose definition
    // starts with them, as in Linux: the bare symbol, then the arguments.
    let exit = "kernel::tests::fprobe::event_tracee n=$arg4:s32";
    for wrong in ["kernel::tests::fprobe::event_tracee%return", "kernel::tests::fprobe::event_tracee n=$arg4:u32"] {
        assert!(define(&alloc::format!("-:probe_exit {wrong}")).is_err(), "{wrong}");
    }
    assert!(dynamic_events().contains("tests/probe_exit "), "a mismatch removed nothing");
    define(&alloc::format!("-:probe_exit {exit}")).unwrap();
    assert!(!dynamic_events().contains("probe_exit"));

    let line =
        |event: &str| trace.lines().find(|l| l.contains(event)).unwrap_or_else(|| panic!("no {event} in {trace}")).to_string();
    let entry_line = line("probe_entry: ");
    for expected in [
        "probe_entry: (kernel::tests::fprobe::event_tracee+0x0/0x",
        " name=\"sample\"",
        " value=48879",
        " small=-3",
        " byte=0x73",
        " bad=(fault)",
        " sym=kernel::workload::fib+0x0/0x",
        " ss=\"kernel::workload::fib+0x0/0x",
        " n=42",
        &alloc::format!(" reg={:#x} ", &sample as *const Sample as usize),
        " s8=-3",
        " u64=42",
        // 'a', bits 4..8 of 0xbeef, bit 1 of 42.
        " c='a' bits=14 flag=1",
    ] {
        assert!(entry_line.contains(expected), "{expected:?} not in {entry_line}");
    }
    let word = |name: &str| {
        let text = entry_line.split(&alloc::format!(" {name}=0x")).nth(1).unwrap().split(' ').next().unwrap();
        usize::from_str_radix(text, 16).unwrap_or_else(|_| panic!("{name}: {entry_line}"))
    };
    let sp = word("sp");
    assert!(sp != 0 && sp % 8 == 0, "{entry_line}");
    if arch::regs::RETURN_ADDRESS == arch::ftrace_abi::ReturnAddress::Stack {
        // $stack0 at the entry: the return address the call pushed, which
        // the exit event (enabled later, so run first) has already pointed
        // at the return trampoline, as a return probe does in Linux.
        let top = ftrace::symbols::kernel::table().unwrap().lookup(word("top")).map(|symbol| symbol.name);
        assert_eq!(top, Some("return_to_handler"), "{entry_line}");
    }
    let exit_line = line("probe_exit: ");
    let caller = "kernel::tests::fprobe::every_fetch_arg_syntax_in_entry_and_exit_events+0x";
    assert!(exit_line.contains(&alloc::format!("probe_exit: ({caller}")), "{exit_line}");
    assert!(exit_line.contains(" <- kernel::tests::fprobe::event_tracee) n=42 "), "{exit_line}");
    assert!(exit_line.contains(&alloc::format!(" ret={:#x} ", result as u32)), "{exit_line}");
    assert!(exit_line.ends_with(" r=239"), "+8($arg1):u8 at exit reads memory through the saved argument: {exit_line}");
    assert_eq!(dynamic_events(), "", "both removed");
}

#[ktest]
fn strings_past_the_record_size_are_cut_short_not_dropped() {
    // Nine 127-byte strings do not fit a 1 KiB record: the last ones are cut.
    let fields: String = (1..=9).map(|i| alloc::format!(" s{i}=+0($arg1):string")).collect();
    define(&alloc::format!("f:tests/long kernel::tests::fprobe::event_tracee{fields}")).unwrap();
    tracefs::write("events/tests/long/enable", "1", FilterMode::Replace).unwrap();
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
    let mut text = [b'x'; 128];
    text[127] = 0;
    let sample = text.as_ptr() as *const Sample;
    event_tracee(black_box(sample), black_box(0), black_box(0), black_box(0));
    tracefs::write("events/tests/long/enable", "0", FilterMode::Replace).unwrap();
    let trace = trace_text();
    define("-:tests/long").unwrap();
    let line = trace.lines().find(|l| l.contains("long: ")).unwrap_or_else(|| panic!("event dropped: {trace}"));
    let full = alloc::format!(" s1=\"{}\"", "x".repeat(127));
    assert!(line.contains(&full), "the first strings are whole: {line}");
    assert!(line.contains(" s9=\"\""), "the last is cut short: {line}");
}

#[ktest]
fn a_removal_of_a_group_removes_each_of_its_events() {
    define("f:grouped/one kernel::workload::fib").unwrap();
    define("f:grouped/two kernel::workload::fib%return").unwrap();
    define("f:other/one kernel::workload::fib").unwrap();
    assert!(define("-:nosuch/").is_err(), "a group with no events");
    assert_eq!(dynamic_events().lines().count(), 3, "a refused removal removes nothing");
    define("-:grouped/").unwrap();
    assert_eq!(dynamic_events(), "f:other/one kernel::workload::fib\n", "as Linux's '-:GRP/'");
    define("-:other/one").unwrap();
}

#[ktest]
fn array_fetch_args_read_values_in_a_row() {
    // With a string, so the record is built from fetched values too.
    define(
        "f:tests/arrays kernel::tests::fprobe::event_tracee name=+0($arg1):x8[6] both=+8($arg1):u16[2] \
         bad=+0($arg2):u64[2] s=+0($arg1):string",
    )
    .unwrap();
    let mut format = String::new();
    tracefs::read("events/tests/arrays/format", &mut format).unwrap();
    assert!(format.contains("\tfield:u8 name[];\t") && format.contains("size:6;"), "{format}");
    let filter = tracefs::write("events/tests/arrays/filter", "name == 1", FilterMode::Replace);
    assert!(filter.is_err_and(|e| e.to_string().starts_with("Illegal operation for field type")), "no filter compares an array");
    let hist = tracefs::write("events/tests/arrays/trigger", "hist:keys=name", FilterMode::Append);
    assert!(hist.is_err_and(|e| e.to_string().contains("is an array")), "nor is one a hist key");
    assert!(format.contains(" name={0x%x,0x%x,0x%x,0x%x,0x%x,0x%x}"), "{format}");
    assert!(format.contains("REC->name[0], REC->name[1], REC->name[2]"), "{format}");
    tracefs::write("events/tests/arrays/enable", "1", FilterMode::Replace).unwrap();
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
    let sample = Sample { name: *b"sample\0\0", value: 0x0002_0001, small: 0 };
    event_tracee(black_box(&sample), black_box(arch::mm::UNMAPPED_ADDRESS), black_box(0), black_box(0));
    tracefs::write("events/tests/arrays/enable", "0", FilterMode::Replace).unwrap();
    let trace = trace_text();
    define("-:tests/arrays").unwrap();
    let line = trace.lines().find(|l| l.contains("arrays: ")).unwrap_or_else(|| panic!("no event: {trace}"));
    assert!(
        line.ends_with(" name={0x73,0x61,0x6d,0x70,0x6c,0x65} both={1,2} bad=(fault) s=\"sample\""),
        "each value in a row, as Linux prints arrays: {line}"
    );
    assert!(define("f:tests/arrays kernel::tests::fprobe::event_tracee a=$arg1:x8[2]").is_err(), "an array is memory");
    assert!(define("f:tests/arrays kernel::tests::fprobe::event_tracee a=+0($arg1):u64[64] b=+0($arg1):u64[64]").is_err());
    let full = "a=+0($arg1):u64[64] b=+0($arg1):u64[61] s=+0($arg1):string";
    assert!(define(&alloc::format!("f:tests/arrays kernel::tests::fprobe::event_tracee {full}")).is_err(), "no room for the NUL");
    assert_eq!(dynamic_events(), "", "refused definitions leave nothing");
}

/// Eight arguments: on x86_64 the last two are passed on the stack.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
extern "C" fn eight_args(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64, g: u64, h: u64) -> u64 {
    black_box(a + b + c + d + e + f + g * h)
}

#[ktest]
fn every_argument_reaches_entry_and_exit_events() {
    define("f:tests/eight kernel::tests::fprobe::eight_args a=$arg1:u64 f=$arg6:u64 g=$arg7:u64 h=$arg8:u64").unwrap();
    define("f:tests/eight_exit kernel::tests::fprobe::eight_args%return a=$arg1:u64 g=$arg7:u64 h=$arg8:u64").unwrap();
    tracefs::write("events/tests/eight/enable", "1", FilterMode::Replace).unwrap();
    tracefs::write("events/tests/eight_exit/enable", "1", FilterMode::Replace).unwrap();
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
    let [a, b, c, d, e, f, g, h] = black_box([11u64, 12, 13, 14, 15, 16, 17, 18]);
    assert_eq!(eight_args(a, b, c, d, e, f, g, h), 11 + 12 + 13 + 14 + 15 + 16 + 17 * 18);
    tracefs::write("events/tests/eight/enable", "0", FilterMode::Replace).unwrap();
    tracefs::write("events/tests/eight_exit/enable", "0", FilterMode::Replace).unwrap();
    let trace = trace_text();
    define("-:tests/eight").unwrap();
    define("-:tests/eight_exit").unwrap();
    let line =
        |event: &str| trace.lines().find(|l| l.contains(event)).unwrap_or_else(|| panic!("no {event} in {trace}")).to_string();
    let entry = line("eight: ");
    assert!(entry.ends_with(" a=11 f=16 g=17 h=18"), "{entry}");
    let exit = line("eight_exit: ");
    assert!(exit.ends_with(" a=11 g=17 h=18"), "the exit sees the saved arguments, stack ones too: {exit}");
}

/// `%REG` in an fprobe event, for every register the architecture names:
/// accepted exactly where the save the event's handler gets records it
/// (the sparse entry save for `f:`, the sparse return save for
/// `f:...%return`), refused as not saved everywhere else; a kprobe event on
/// the same site gets the full save, and every register.
#[ktest]
fn every_register_is_accepted_by_an_event_exactly_where_its_save_records_it() {
    let mut wrong = Vec::new();
    for info in arch::regs::REGISTERS {
        for name in info.names {
            for (kind, suffix, saved) in
                [("f", "", arch::ftrace_abi::Saved::EntryArgs), ("f", "%return", arch::ftrace_abi::Saved::Return)]
            {
                let result = define(&alloc::format!("{kind}:regcheck kernel::workload::fib{suffix} v=%{name}"));
                let recorded = info.saved_by & saved.bit() != 0;
                match (&result, recorded) {
                    (Ok(()), true) => define("-:regcheck").unwrap(),
                    (Err(tracefs::TracefsError::Invalid(m)), false) if m.contains(&alloc::format!("'%{name}' is not saved")) => {}
                    _ => wrong.push(alloc::format!("{kind}:...{suffix} %{name}: {result:?} (recorded: {recorded})")),
                }
            }
            let full = define(&alloc::format!("p:kprobes/regcheck kernel::workload::fib v=%{name}"));
            match full {
                Ok(()) => define("-:kprobes/regcheck").unwrap(),
                Err(error) => wrong.push(alloc::format!("p: %{name} on the full save: {error:?}")),
            }
        }
    }
    assert_eq!(dynamic_events(), "", "nothing left defined");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[ktest]
fn bad_event_definitions_are_refused_and_register_nothing() {
    let unsaved = arch::selftest::MARKED_REGISTERS[0].0;
    // Each refused for its own reason: a case refused for another one
    // (a typo in the case, a symbol gone) would not test what it names.
    let cases = [
        ("f:e1 no::such::symbol".to_string(), "unknown symbol 'no::such::symbol'"),
        ("f:e12 no_such_bare_name".into(), "unknown symbol 'no_such_bare_name'"),
        ("f:e13 run".into(), "'run' matches "),
        ("f:e2 ftrace::deferred::synchronize".into(), "'ftrace::deferred::synchronize' is not a traceable function"),
        ("f:e3 kernel::workload::fib $arg1:u7".into(), "unknown type 'u7'"),
        ("f:e4 kernel::workload::fib $arg0".into(), "invalid fetch argument '$arg0'"),
        ("f:e5 kernel::workload::fib +8($arg1".into(), "invalid fetch argument '+8($arg1'"),
        (alloc::format!("f:e6 kernel::workload::fib %{unsaved}"), "is not saved by the sparse (ARGS) register save"),
        ("f:e7 kernel::workload::fib %nosuchreg".into(), "unknown register '%nosuchreg'"),
        ("f:e8 kernel::workload::fib $retval".into(), "$retval is only available in %return events"),
        ("f:e9 kernel::workload::fib $arg9".into(), "$arg9: only $arg1 to $arg"),
        ("q:e10 kernel::workload::fib".into(), "unknown probe type 'q:e10'"),
        ("f:1e kernel::workload::fib".into(), "invalid group or event name '1e'"),
        ("f:e15 kernel::workload::fib $arg1:string".into(), "the string type needs a dereference"),
        (alloc::format!("f:e11 kernel::workload::fib {}", "a=$arg1 ".repeat(80)), "event definition longer than"),
    ];
    for (case, why) in &cases {
        let result = define(case);
        assert!(matches!(&result, Err(tracefs::TracefsError::Invalid(m)) if m.contains(why)), "{case}: {result:?}, not '{why}'");
    }
    let ambiguous = define("f:e14 run");
    assert!(
        matches!(&ambiguous, Err(tracefs::TracefsError::Invalid(m)) if m.starts_with("'run' matches ") && m.contains(" kernel::workload::run")),
        "a bare name of several functions lists them: {ambiguous:?}"
    );
    define("f:dup fib").unwrap();
    let duplicate = define("f:dup kernel::workload::fs::lookup");
    assert!(matches!(&duplicate, Err(tracefs::TracefsError::Invalid(m)) if m.contains("already exists")), "{duplicate:?}");
    assert_eq!(dynamic_events(), "f:fprobes/dup fib\n", "only the good one exists, as it was written");
    assert!(tracefs::write("events/fprobes/nosuch/enable", "1", FilterMode::Replace).is_err());
    tracefs::write("events/fprobes/dup/enable", "1", FilterMode::Replace).unwrap();
    assert!(define("-:dup").is_err(), "an enabled event cannot be removed");
    assert!(tracefs::write("dynamic_events", "", FilterMode::Replace).is_err(), "nor cleared");
    tracefs::write("events/fprobes/dup/enable", "0", FilterMode::Replace).unwrap();
    tracefs::write("dynamic_events", "", FilterMode::Replace).unwrap();
    assert_eq!(dynamic_events(), "");
    let mut enabled = 0;
    ftrace::for_each_site(|site| enabled += site.ops_count);
    assert_eq!(enabled, 0);
}

/// Adding, enabling, disabling and removing an event, with the tracers
/// switched in between, gives back everything it allocated.
#[ktest]
fn event_rounds_and_tracer_switches_leak_nothing() {
    let round = |i: usize| {
        define("f:leakcheck kernel::workload::fib%return n=$arg1 r=$retval s=+0($stack):string").unwrap();
        tracefs::write("events/fprobes/leakcheck/enable", "1", FilterMode::Replace).unwrap();
        crate::workload::fib(black_box(3));
        tracefs::write("events/fprobes/leakcheck/enable", "0", FilterMode::Replace).unwrap();
        let tracer = if i % 2 == 0 { "function" } else { "function_graph" };
        tracefs::write("current_tracer", tracer, FilterMode::Replace).unwrap();
        crate::workload::fib(black_box(2));
        tracefs::write("current_tracer", "nop", FilterMode::Replace).unwrap();
        tracefs::write("dynamic_events", "-:leakcheck", FilterMode::Append).unwrap();
    };
    // The tracers on the workload only (all of the kernel 600 times over
    // would just be slow). One round first: what is allocated once.
    tracefs::write("set_ftrace_filter", "*fib*", FilterMode::Replace).unwrap();
    round(0);
    ftrace::deferred::reclaim();
    let before = crate::heap::stats().used;
    let mut used_after = [0; 2];
    for (rounds, used) in [(1..=100), (101..=300)].into_iter().zip(&mut used_after) {
        rounds.for_each(round);
        ftrace::deferred::reclaim();
        *used = crate::heap::stats().used;
    }
    let [middle, after] = used_after;
    tracefs::write("set_ftrace_filter", "", FilterMode::Replace).unwrap();
    assert!(after <= before + 8 * 1024, "heap grew from {before} to {after} bytes over 300 rounds");
    // A leak grows with the rounds: a small one (a box a round) shows over
    // the last 200 of them.
    assert!(after <= middle + 512, "heap grew from {middle} to {after} bytes over the last 200 rounds");
    let mut enabled = String::new();
    tracefs::read("enabled_functions", &mut enabled).unwrap();
    assert_eq!(enabled, "", "no site left enabled");
}

#[ktest]
fn comm_fetches_the_current_task_name_as_linux_does() {
    define("f:commev kernel::workload::fib who=$comm").unwrap();
    define("r:kprobes/commret kernel::workload::fib $comm").unwrap();
    assert!(dynamic_events().contains("r:kprobes/commret kernel::workload::fib arg1=$comm\n"), "{}", dynamic_events());
    tracefs::write("events/fprobes/commev/enable", "1", FilterMode::Replace).unwrap();
    tracefs::write("events/kprobes/commret/enable", "1", FilterMode::Replace).unwrap();
    assert_eq!(crate::workload::fib(1), 1);
    let me = trace::events::record::comm_str(ftrace::task::current().comm_bytes()).to_string();
    let trace = trace_text();
    assert!(
        trace.contains(&alloc::format!(": commev: (kernel::workload::fib+0x0/"))
            && trace.contains(&alloc::format!(" who=\"{me}\"\n")),
        "{trace}"
    );
    assert!(trace.contains(&alloc::format!(" arg1=\"{me}\"\n")), "{trace}");
    tracefs::write("events/fprobes/commev/enable", "0", FilterMode::Replace).unwrap();
    tracefs::write("events/kprobes/commret/enable", "0", FilterMode::Replace).unwrap();
    define("-:commev").unwrap();
    define("-:commret").unwrap();
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
}

#[ktest]
fn a_removal_without_a_group_removes_the_name_in_every_group() {
    define("f:ga/same fib").unwrap();
    define("f:gb/same fib%return").unwrap();
    define("p:kprobes/kept kernel::workload::fib").unwrap();
    tracefs::write("events/gb/same/enable", "1", FilterMode::Replace).unwrap();
    assert!(define("-:same").is_err(), "one of them is enabled: none goes");
    assert_eq!(dynamic_events().lines().count(), 3, "{}", dynamic_events());
    tracefs::write("events/gb/same/enable", "0", FilterMode::Replace).unwrap();
    define("-:same").unwrap();
    assert_eq!(dynamic_events(), "p:kprobes/kept kernel::workload::fib\n", "both groups' 'same' went, as in Linux");
    define("-:kept").unwrap();
}

#[ktest]
fn removing_an_event_that_recorded_empties_the_buffers_as_linux_does() {
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
    define("f:gone kernel::workload::fib n=$arg1").unwrap();
    define("f:idle kernel::workload::fib").unwrap();
    tracefs::write("events/fprobes/gone/enable", "1", FilterMode::Replace).unwrap();
    // Records in the snapshot (the live buffer swapped in), then live.
    assert_eq!(crate::workload::fib(1), 1);
    tracefs::write("snapshot", "1", FilterMode::Replace).unwrap();
    assert_eq!(crate::workload::fib(1), 1);
    tracefs::write("events/fprobes/gone/enable", "0", FilterMode::Replace).unwrap();
    tracefs::write("trace_marker", "kept", FilterMode::Append).unwrap();
    let snapshot = || {
        let mut text = String::new();
        tracefs::read("snapshot", &mut text).unwrap();
        text
    };
    assert!(trace_text().contains(": gone: (kernel::workload::fib+0x0/"), "{}", trace_text());
    assert!(snapshot().contains(": gone: ("), "{}", snapshot());
    // An event that never recorded goes without touching the buffers.
    define("-:idle").unwrap();
    assert!(trace_text().contains(": gone: ("), "{}", trace_text());
    // The one that did takes its records (and everything else) with it:
    // nothing is left to print them with.
    define("-:gone").unwrap();
    for (file, text) in [("trace", trace_text()), ("snapshot", snapshot())] {
        assert!(!text.contains(": gone:") && !text.contains("Unknown type") && !text.contains("kept"), "{file}: {text}");
    }
    tracefs::write("snapshot", "0", FilterMode::Replace).unwrap();
}

/// A static a probe event reads through `@SYM` (its value is known).
static PROBED_STATIC: AtomicU64 = AtomicU64::new(0x1122_3344_5566_7788);

#[ktest]
fn at_sym_and_at_addr_read_statics_as_linux_does() {
    let address = &PROBED_STATIC as *const AtomicU64 as usize;
    define(&alloc::format!(
        "p:kprobes/statics kernel::workload::fib v=@kernel::tests::fprobe::PROBED_STATIC:x64 \
         hi=@PROBED_STATIC+4:x32 lo=@{address:#x}:x16"
    ))
    .unwrap();
    assert!(dynamic_events().contains(" v=@kernel::tests::fprobe::PROBED_STATIC:x64 hi=@PROBED_STATIC+4:x32 lo=@0x"));
    tracefs::write("events/kprobes/statics/enable", "1", FilterMode::Replace).unwrap();
    assert_eq!(crate::workload::fib(1), 1);
    PROBED_STATIC.store(7, Ordering::Relaxed);
    assert_eq!(crate::workload::fib(1), 1);
    tracefs::write("events/kprobes/statics/enable", "0", FilterMode::Replace).unwrap();
    let trace = trace_text();
    define("-:statics").unwrap();
    let lines: Vec<&str> = trace.lines().filter(|line| line.contains(" statics: ")).collect();
    assert_eq!(lines.len(), 2, "{trace}");
    assert!(lines[0].ends_with(" v=0x1122334455667788 hi=0x11223344 lo=0x7788"), "{}", lines[0]);
    assert!(lines[1].ends_with(" v=0x7 hi=0x0 lo=0x7"), "the value when the probe hit: {}", lines[1]);
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
    // A function's symbol reads its code, as in Linux (any kernel symbol);
    // an unknown name is refused by name.
    let run = crate::workload::run as *const () as usize;
    define("p:kprobes/code kernel::workload::fib op=@kernel::workload::run:x8").unwrap();
    tracefs::write("events/kprobes/code/enable", "1", FilterMode::Replace).unwrap();
    assert_eq!(crate::workload::fib(0), 0);
    tracefs::write("events/kprobes/code/enable", "0", FilterMode::Replace).unwrap();
    let trace = trace_text();
    define("-:code").unwrap();
    // SAFETY: a function's first byte, mapped text.
    let first = unsafe { *(run as *const u8) };
    assert!(trace.lines().any(|line| line.contains(" code: ") && line.ends_with(&alloc::format!(" op={first:#x}"))), "{trace}");
    tracefs::write("trace", "", FilterMode::Replace).unwrap();
    let refused = define("p:kprobes/bad kernel::workload::fib v=@kernel::workload::nosuch");
    assert!(refused.is_err_and(|error| error.to_string().contains("unknown symbol 'kernel::workload::nosuch'")));
    assert_eq!(dynamic_events(), "");
}
