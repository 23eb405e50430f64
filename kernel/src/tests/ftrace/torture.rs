//! Torture of live patching: a debug exception at every instruction of a
//! traced call (`arch::step`), with every kind of user attached, moving the
//! task to another CPU at chosen instructions, while another CPU patches the
//! same site, and through a patch batch frozen half-way.
//!
//! The step hook ([`on_step`]) checks, at every instruction, what a one-word
//! stack imbalance near a traced function's entry would break:
//!
//! - when the function's site has run (the first instruction after it), the
//!   stack pointer is the one the function was entered with and the return
//!   address slot holds the caller's return address or a return trampoline;
//! - when the call is back in its caller, the stack pointer is the caller's
//!   again and the return value is the right one.
//!
//! The step handler itself checks that the interrupted context and the word
//! at its stack pointer come back exactly. Both only count what they find
//! (a report, never a panic inside an exception); the tests assert on the
//! counts, and on the hook having seen every place the call must pass:
//! the trampolines (down to their last instruction), the return trampoline,
//! the kprobe's out-of-line slot, an `int3`-emulated call.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::hint::black_box;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arch::ftrace::{CALL_OFFSET, INSN_LEN};
use arch::ftrace_abi::{return_trampoline_address, trampoline_address, ReturnSlot, ReturnTrampoline, Saved, SavedRegs};
use arch::step::{self, StepAction};
use fprobe::{EntryData, Fprobe, FprobeConfig, RegisteredFprobe, Target};
use ftrace::{FilterKind, FilterMode, FtraceOps, FtraceRegs, OpsFlags, PtRegs, Trampoline};
use kprobes::kretprobe::{Kretprobe, KretprobeConfig, RegisteredKretprobe};
use kprobes::{Kprobe, KprobeConfig, Location, RegisteredKprobe};
use ktest_macros::ktest;
use rethook::{Rethook, RethookMode, RethookNode};

use crate::sched;
use crate::tests::{read_file as read, write_file as write};

// ---- the traced function ----

/// The function every test here steps through.
#[inline(never)]
pub extern "C" fn torture_target(a: u64, b: u64) -> u64 {
    black_box(a.rotate_left(9) ^ b.wrapping_mul(3))
}

fn expected(a: u64, b: u64) -> u64 {
    a.rotate_left(9) ^ b.wrapping_mul(3)
}

fn target() -> usize {
    torture_target as extern "C" fn(u64, u64) -> u64 as usize
}

const TARGET_NAME: &str = "kernel::tests::ftrace::torture::torture_target";

/// Where the instructions after the target's site start (the mid-function
/// kprobe goes there: its first prologue instruction, which moves the
/// stack pointer on both architectures).
fn after_site() -> usize {
    target() + CALL_OFFSET + INSN_LEN
}

// ---- what the step hook watches ----

/// Address ranges the hook counts steps in, and their last instruction.
const REGIONS: usize = 6;
const ARGS_CALLER: usize = 0;
const REGS_CALLER: usize = 1;
const RETURN: usize = 2;
const RETURN_REGS: usize = 3;
const SLOTS: usize = 4;
const TARGET: usize = 5;

static REGION_START: [AtomicUsize; REGIONS] = [const { AtomicUsize::new(0) }; REGIONS];
static REGION_END: [AtomicUsize; REGIONS] = [const { AtomicUsize::new(0) }; REGIONS];
static REGION_STEPS: [AtomicU64; REGIONS] = [const { AtomicU64::new(0) }; REGIONS];
/// Steps at each region's last instruction (a trampoline's `ret`/`br`,
/// after x86_64's `popfq` in the full ones).
static LAST_STEPS: [AtomicU64; REGIONS] = [const { AtomicU64::new(0) }; REGIONS];

/// Whether the hook asks for reschedules (a move to another CPU).
static MIGRATE: AtomicBool = AtomicBool::new(false);
/// Where the hook parks the stepped task (0: nowhere), and the task it
/// parked there (0: none), for `sched::unpark`.
static PARK_AT: AtomicUsize = AtomicUsize::new(0);
static PARKED: AtomicUsize = AtomicUsize::new(0);
static STEPS: AtomicU64 = AtomicU64::new(0);
static PREVIOUS_IP: AtomicUsize = AtomicUsize::new(0);
static PREVIOUS_CPU: AtomicUsize = AtomicUsize::new(usize::MAX);
static CPU_CHANGES: AtomicU64 = AtomicU64::new(0);
static MIGRATIONS_ASKED: AtomicU64 = AtomicU64::new(0);
/// Calls entered through a trampoline's first instruction (a real call)
/// and through its second (the `int3` handler emulated the call, and the
/// first ran before the exception return's step).
static REAL_CALLS: AtomicU64 = AtomicU64::new(0);
static EMULATED_CALLS: AtomicU64 = AtomicU64::new(0);

/// The call in progress: its stack pointer and return address at the
/// target's entry (0: none), the return value it must give.
static ENTRY_SP: AtomicUsize = AtomicUsize::new(0);
static ENTRY_RETURN: AtomicUsize = AtomicUsize::new(0);
static WANT: AtomicU64 = AtomicU64::new(0);
static ENTERED: AtomicU64 = AtomicU64::new(0);
static SITES_PASSED: AtomicU64 = AtomicU64::new(0);
static RETURNED: AtomicU64 = AtomicU64::new(0);

/// What the hook found wrong: how many, and the first (what, ip, expected,
/// found).
static WRONG: AtomicU64 = AtomicU64::new(0);
static FIRST_WRONG: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];
const WRONG_SITE_SP: usize = 1;
const WRONG_SITE_RETURN: usize = 2;
const WRONG_RETURN_SP: usize = 3;
const WRONG_RETURN_VALUE: usize = 4;

fn wrong(what: usize, ip: usize, expected: usize, found: usize) {
    if WRONG.fetch_add(1, Ordering::SeqCst) == 0 {
        for (slot, value) in FIRST_WRONG.iter().zip([what, ip, expected, found]) {
            slot.store(value, Ordering::SeqCst);
        }
    }
}

fn in_region(region: usize, ip: usize) -> bool {
    (REGION_START[region].load(Ordering::Relaxed)..REGION_END[region].load(Ordering::Relaxed)).contains(&ip)
}

/// The stack pointer a call's caller has again once it returned, for a
/// call whose stack pointer at entry was `sp`.
fn caller_sp(sp: usize) -> usize {
    match ReturnSlot::AT_ENTRY {
        ReturnSlot::Stack { offset } => sp + offset + 8,
        ReturnSlot::LinkRegister => sp,
    }
}

/// The step hook: counts, checks the target's balance, and at chosen
/// instructions moves the task to another CPU. Lock-free and allocation
/// free (it runs inside anything the stepped call runs, locks included).
#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
fn on_step(regs: &PtRegs, preemptible: bool) -> StepAction {
    let (ip, sp) = (regs.ip(), regs.sp());
    let step = STEPS.fetch_add(1, Ordering::Relaxed);
    let previous = PREVIOUS_IP.swap(ip, Ordering::Relaxed);
    let cpu = arch::cpu::id();
    if PREVIOUS_CPU.swap(cpu, Ordering::Relaxed) != cpu && step > 0 {
        CPU_CHANGES.fetch_add(1, Ordering::Relaxed);
    }
    let mut anywhere = false;
    for region in 0..REGIONS {
        if in_region(region, ip) {
            anywhere = true;
            REGION_STEPS[region].fetch_add(1, Ordering::Relaxed);
            if ip == REGION_END[region].load(Ordering::Relaxed) - arch::ftrace::RETURN_INSN_LEN {
                LAST_STEPS[region].fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let target = target();
    if previous == target + CALL_OFFSET {
        for trampoline in [ARGS_CALLER, REGS_CALLER] {
            if ip == REGION_START[trampoline].load(Ordering::Relaxed) {
                REAL_CALLS.fetch_add(1, Ordering::Relaxed);
            } else if in_region(trampoline, ip) {
                EMULATED_CALLS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let saved = SavedRegs::full(regs, Saved::EntryFull);
    if ip == target {
        ENTERED.fetch_add(1, Ordering::Relaxed);
        ENTRY_SP.store(sp, Ordering::Relaxed);
        ENTRY_RETURN.store(saved.return_address_in(ReturnSlot::AT_ENTRY).unwrap_or(0), Ordering::Relaxed);
    } else if ip == target + CALL_OFFSET + INSN_LEN {
        // The site has run: nothing moved.
        SITES_PASSED.fetch_add(1, Ordering::Relaxed);
        let entry_sp = ENTRY_SP.load(Ordering::Relaxed);
        if sp != entry_sp {
            wrong(WRONG_SITE_SP, ip, entry_sp, sp);
        }
        let ret = saved.return_address_in(ReturnSlot::AT_ENTRY).unwrap_or(0);
        let hooked = ret == return_trampoline_address(ReturnTrampoline::Sparse)
            || ret == return_trampoline_address(ReturnTrampoline::Full);
        if ret != ENTRY_RETURN.load(Ordering::Relaxed) && !hooked {
            wrong(WRONG_SITE_RETURN, ip, ENTRY_RETURN.load(Ordering::Relaxed), ret);
        }
    } else if ip == ENTRY_RETURN.load(Ordering::Relaxed) && ENTRY_SP.load(Ordering::Relaxed) != 0 {
        // Back in the caller.
        RETURNED.fetch_add(1, Ordering::Relaxed);
        let want_sp = caller_sp(ENTRY_SP.swap(0, Ordering::Relaxed));
        if sp != want_sp {
            wrong(WRONG_RETURN_SP, ip, want_sp, sp);
        }
        let value = SavedRegs::full(regs, Saved::ReturnFull).return_value();
        if value != WANT.load(Ordering::Relaxed) {
            wrong(WRONG_RETURN_VALUE, ip, WANT.load(Ordering::Relaxed) as usize, value as usize);
        }
    }
    if ip == PARK_AT.load(Ordering::Relaxed) && preemptible {
        PARK_AT.store(0, Ordering::Relaxed);
        PARKED.store(sched::park_current(), Ordering::SeqCst);
        return StepAction::Reschedule;
    }
    let chosen = anywhere && step % 23 == 0;
    if chosen && MIGRATE.load(Ordering::Relaxed) && preemptible {
        if let Some(next) = other_cpu(cpu) {
            MIGRATIONS_ASKED.fetch_add(1, Ordering::Relaxed);
            sched::restrict_current(1 << next);
            return StepAction::Reschedule;
        }
    }
    StepAction::Continue
}

/// An online CPU other than `cpu`, the next one up.
fn other_cpu(cpu: usize) -> Option<usize> {
    (1..arch::MAX_CPUS).map(|i| (cpu + i) % arch::MAX_CPUS).find(|&other| arch::percpu::is_online(other))
}

/// Sets up the regions and zeroes every count.
fn reset_watch() {
    let symbol_end = |address: usize| {
        let symbol = ftrace::symbols::kernel::table().unwrap().lookup(address).unwrap();
        symbol.address + symbol.size
    };
    let trampolines = [
        trampoline_address(Trampoline::Args),
        trampoline_address(Trampoline::Regs),
        return_trampoline_address(ReturnTrampoline::Sparse),
        return_trampoline_address(ReturnTrampoline::Full),
    ];
    for (region, start) in trampolines.into_iter().enumerate() {
        REGION_START[region].store(start, Ordering::SeqCst);
        REGION_END[region].store(symbol_end(start), Ordering::SeqCst);
    }
    let slots = arch::kprobes::slot_address(0);
    REGION_START[SLOTS].store(slots, Ordering::SeqCst);
    REGION_END[SLOTS].store(slots + arch::kprobes::SLOTS * arch::kprobes::SLOT_SIZE, Ordering::SeqCst);
    REGION_START[TARGET].store(target(), Ordering::SeqCst);
    REGION_END[TARGET].store(symbol_end(target()), Ordering::SeqCst);
    for counter in REGION_STEPS.iter().chain(&LAST_STEPS).chain([
        &STEPS,
        &CPU_CHANGES,
        &MIGRATIONS_ASKED,
        &REAL_CALLS,
        &EMULATED_CALLS,
        &ENTERED,
        &SITES_PASSED,
        &RETURNED,
        &WRONG,
    ]) {
        counter.store(0, Ordering::SeqCst);
    }
    ENTRY_SP.store(0, Ordering::SeqCst);
    PREVIOUS_CPU.store(usize::MAX, Ordering::SeqCst);
}

/// What the hook found wrong, as a sentence (empty: nothing).
fn wrongs() -> String {
    let count = WRONG.load(Ordering::SeqCst);
    let (what, ip, expected, found) = (
        FIRST_WRONG[0].load(Ordering::SeqCst),
        FIRST_WRONG[1].load(Ordering::SeqCst),
        FIRST_WRONG[2].load(Ordering::SeqCst),
        FIRST_WRONG[3].load(Ordering::SeqCst),
    );
    let mut text = String::new();
    if count > 0 {
        let what = match what {
            WRONG_SITE_SP => "the stack pointer after the site",
            WRONG_SITE_RETURN => "the return address after the site",
            WRONG_RETURN_SP => "the caller's stack pointer after the return",
            _ => "the return value",
        };
        text = format!("{count} wrong, first {what} at {ip:#x}: expected {expected:#x}, found {found:#x}; ");
    }
    if step::violations() > 0 {
        text += &format!("the step handler changed {:?}", step::first_violation());
    }
    text
}

/// Calls the target with every instruction stepped, from the call's
/// arguments to its result, on this task.
#[inline(never)]
#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
fn stepped_call(a: u64, b: u64) -> u64 {
    WANT.store(expected(a, b), Ordering::SeqCst);
    step::begin();
    let result = torture_target(black_box(a), black_box(b));
    step::end();
    result
}

/// Steps `calls` calls of the target (the hook installed meanwhile) and
/// checks each one's result; answers how many were wrong.
fn stepped_calls(calls: u64, seed: u64) -> u64 {
    let mut bad = 0;
    for i in 0..calls {
        let (a, b) = (seed.wrapping_mul(i + 1), seed ^ i);
        bad += u64::from(stepped_call(a, b) != expected(a, b));
    }
    bad
}

// ---- the users ----

static COUNTS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
const FPROBE_ENTRY: usize = 0;
const FPROBE_EXIT: usize = 1;
const RETHOOK_RETURN: usize = 2;
const KPROBE_PRE: usize = 3;
const KPROBE_POST: usize = 4;
const KRETPROBE: usize = 5;
const REGS_OPS: usize = 6;
const ARGS_OPS: usize = 7;
/// Arguments or return values a user saw wrong, and the first: the
/// user's [`COUNTS`] index and what it saw (two arguments, or a return
/// value and 0; `u64::MAX`: not saved).
static USERS_WRONG: AtomicU64 = AtomicU64::new(0);
static FIRST_USER_WRONG: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

fn user_wrong(user: usize, seen: [u64; 2]) {
    if USERS_WRONG.fetch_add(1, Ordering::SeqCst) == 0 {
        for (slot, value) in FIRST_USER_WRONG.iter().zip([user as u64, seen[0], seen[1], WANT.load(Ordering::SeqCst)]) {
            slot.store(value, Ordering::SeqCst);
        }
    }
}

/// What users saw wrong, as a sentence.
fn users_wrong() -> String {
    let [user, first, second, want] = FIRST_USER_WRONG.each_ref().map(|value| value.load(Ordering::SeqCst));
    format!(
        "{} wrong, first user {user} saw ({first:#x}, {second:#x}) for a call that returns {want:#x}",
        USERS_WRONG.load(Ordering::SeqCst)
    )
}

fn count(user: usize) {
    COUNTS[user].fetch_add(1, Ordering::Relaxed);
}

fn counts() -> [u64; 8] {
    COUNTS.each_ref().map(|count| count.load(Ordering::SeqCst))
}

/// Checks a save's arguments against `WANT` (what the target returns for
/// them), for user `user`.
fn check_arguments(user: usize, regs: SavedRegs) {
    let (a, b) = (regs.argument(0), regs.argument(1));
    match (a, b) {
        (Some(a), Some(b)) if expected(a, b) == WANT.load(Ordering::Relaxed) => {}
        _ => user_wrong(user, [a.unwrap_or(u64::MAX), b.unwrap_or(u64::MAX)]),
    }
}

fn check_return(user: usize, value: u64) {
    if value != WANT.load(Ordering::Relaxed) {
        user_wrong(user, [value, 0]);
    }
}

fn fprobe_entry(_fp: &Fprobe, _ip: usize, _ret: usize, fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    count(FPROBE_ENTRY);
    check_arguments(FPROBE_ENTRY, fregs.view());
    false
}

fn fprobe_exit(_fp: &Fprobe, _ip: usize, _ret: usize, fregs: &mut FtraceRegs, data: &mut EntryData) {
    count(FPROBE_EXIT);
    check_return(FPROBE_EXIT, fregs.return_value());
    // The entry's arguments, kept for the exit (on aarch64 x0 is the
    // return value by now).
    match (data.argument(0), data.argument(1)) {
        (Some(a), Some(b)) if expected(a, b) == WANT.load(Ordering::Relaxed) => {}
        (a, b) => user_wrong(FPROBE_EXIT, [a.unwrap_or(u64::MAX), b.unwrap_or(u64::MAX)]),
    }
}

fn fprobe_config() -> FprobeConfig {
    FprobeConfig {
        entry: Some(fprobe_entry),
        exit: Some(fprobe_exit),
        entry_data_words: 0,
        save_args: true,
        private: 0,
        free_private: None,
    }
}

static RETHOOK: spin::Mutex<Option<Rethook>> = spin::Mutex::new(None);

extern "C" fn rethook_entry(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    if let Some(rethook) = RETHOOK.lock().as_ref() {
        if let Some(node) = rethook.try_get() {
            let _ = node.hook(fregs);
        }
    }
}

fn rethook_return(_node: &RethookNode, _data: usize, _ret_addr: usize, fregs: &mut FtraceRegs) {
    count(RETHOOK_RETURN);
    check_return(RETHOOK_RETURN, fregs.return_value());
}

static RETHOOK_OPS: FtraceOps = FtraceOps::new(rethook_entry, OpsFlags::RECURSION);

fn kprobe_pre(_probe: &Kprobe, regs: &PtRegs) {
    count(KPROBE_PRE);
    check_arguments(KPROBE_PRE, SavedRegs::full(regs, Saved::EntryFull));
}

fn kprobe_post(_probe: &Kprobe, _regs: &PtRegs) {
    count(KPROBE_POST);
}

fn kretprobe_return(_rp: &Kretprobe, _ret_addr: usize, regs: &PtRegs, _data: &[u64]) {
    count(KRETPROBE);
    check_return(KRETPROBE, SavedRegs::full(regs, Saved::ReturnFull).return_value());
}

extern "C" fn regs_callback(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    count(REGS_OPS);
    match fregs.regs() {
        Some(regs) => check_arguments(REGS_OPS, SavedRegs::full(regs, Saved::EntryFull)),
        None => user_wrong(REGS_OPS, [u64::MAX, u64::MAX]),
    }
}

extern "C" fn args_callback(_ip: usize, _parent: usize, _ops: &FtraceOps, fregs: &mut FtraceRegs) {
    count(ARGS_OPS);
    check_arguments(ARGS_OPS, fregs.view());
}

static REGS_OPS_: FtraceOps = FtraceOps::new(regs_callback, OpsFlags::SAVE_REGS);
static ARGS_OPS_: FtraceOps = FtraceOps::new(args_callback, OpsFlags::RECURSION);

/// The counts each call must add to [`COUNTS`], with the full-registers
/// users or without.
fn per_call(full: bool) -> [u64; 8] {
    let full = u64::from(full);
    [1, 1, 1, 1, 1, full, full, 0]
}

/// Every user on the target. `full`: also those that want every register
/// (a kretprobe, an ops with `SAVE_REGS`, a rethook with full registers),
/// so the site calls the full trampolines; without, the sparse ones.
struct Users {
    fprobe: RegisteredFprobe,
    kprobe: RegisteredKprobe,
    kretprobe: Option<RegisteredKretprobe>,
}

impl Users {
    fn attach(full: bool) -> Users {
        crate::tracefs::instances::mkdir("instances/torture").unwrap();
        write("instances/torture/set_ftrace_filter", TARGET_NAME);
        write("instances/torture/current_tracer", "function");
        write("set_ftrace_filter", TARGET_NAME);
        write("current_tracer", "function_graph");
        let fprobe = fprobe::register(fprobe_config(), Target::Addresses(&[target()])).unwrap();
        let mode = if full { RethookMode::FullRegs } else { RethookMode::Sparse };
        *RETHOOK.lock() = Some(Rethook::new(rethook_return, 0, 16, 1, mode));
        ftrace::set_filter_ips(&RETHOOK_OPS, FilterKind::Filter, &[target()], FilterMode::Replace).unwrap();
        ftrace::register(&RETHOOK_OPS).unwrap();
        let config = KprobeConfig { pre_handler: Some(kprobe_pre), post_handler: Some(kprobe_post), private: 0 };
        let kprobe = kprobes::register_kprobe(&Location::Address(after_site()), config).unwrap();
        let kretprobe = full.then(|| {
            let config =
                KretprobeConfig { entry_handler: None, handler: kretprobe_return, data_words: 0, maxactive: 16, private: 0 };
            let kretprobe = kprobes::register_kretprobe(&Location::Address(target()), config).unwrap();
            ftrace::set_filter_ips(&REGS_OPS_, FilterKind::Filter, &[target()], FilterMode::Replace).unwrap();
            ftrace::register(&REGS_OPS_).unwrap();
            kretprobe
        });
        Users { fprobe, kprobe, kretprobe }
    }

    fn detach(self) {
        if let Some(kretprobe) = self.kretprobe {
            ftrace::unregister(&REGS_OPS_).unwrap();
            kretprobe.unregister();
        }
        self.kprobe.unregister();
        ftrace::unregister(&RETHOOK_OPS).unwrap();
        self.fprobe.unregister().map_err(|(_, error)| error).unwrap();
        ftrace::deferred::synchronize();
        drop(RETHOOK.lock().take());
        write("current_tracer", "nop");
        write("set_ftrace_filter", "");
        write("instances/torture/current_tracer", "nop");
        crate::tracefs::instances::rmdir("instances/torture").unwrap();
    }
}

/// Runs `body` with the step hook installed and the task's affinity
/// restored afterwards.
fn with_hook<R>(migrate: bool, body: impl FnOnce() -> R) -> R {
    reset_watch();
    MIGRATE.store(migrate, Ordering::SeqCst);
    step::set_hook(Some(on_step));
    let result = body();
    step::set_hook(None);
    MIGRATE.store(false, Ordering::SeqCst);
    sched::set_affinity(u64::MAX);
    result
}

// ---- the tests ----

/// The machinery first: a plain call of an untraced site stepped, every
/// instruction seen, the handler's context checks clean.
#[ktest]
fn a_stepped_call_takes_a_debug_exception_at_every_instruction() {
    let violations = step::violations();
    let bad = with_hook(false, || stepped_calls(3, 7));
    assert_eq!(bad, 0, "results");
    assert_eq!(step::violations(), violations, "{}", wrongs());
    assert_eq!(WRONG.load(Ordering::SeqCst), 0, "{}", wrongs());
    assert_eq!(
        (ENTERED.load(Ordering::SeqCst), SITES_PASSED.load(Ordering::SeqCst)),
        (3, 3),
        "every call entered and passed its site"
    );
    assert_eq!(RETURNED.load(Ordering::SeqCst), 3, "and returned");
    let in_target = REGION_STEPS[TARGET].load(Ordering::SeqCst);
    assert!(in_target >= 3 * 3, "steps inside the target: {in_target}");
    assert_eq!(step::counters().1, 0, "no stray debug exception");
}

/// Steps calls of the target with every user attached, moving the task to
/// another CPU at chosen instructions; `full` picks the trampolines.
fn torture(full: bool) {
    const CALLS: u64 = 6;
    let violations = step::violations();
    USERS_WRONG.store(0, Ordering::SeqCst);
    let users = Users::attach(full);
    let before = counts();
    let bad = with_hook(true, || stepped_calls(CALLS, 0x1234_5678));
    let after = counts();
    let graph = read("trace");
    let function = read("instances/torture/trace");
    users.detach();
    let name = if full { "full" } else { "sparse" };
    assert_eq!(bad, 0, "{name}: results");
    assert_eq!(WRONG.load(Ordering::SeqCst), 0, "{name}: {}", wrongs());
    assert_eq!(step::violations(), violations, "{name}: {}", wrongs());
    assert_eq!(USERS_WRONG.load(Ordering::SeqCst), 0, "{name}: {}", users_wrong());
    let added: Vec<u64> = after.iter().zip(before).map(|(after, before)| after - before).collect();
    let want: Vec<u64> = per_call(full).iter().map(|per_call| per_call * CALLS).collect();
    assert_eq!(added, want, "{name}: each user ran once per call");
    let traced = |text: &str, marker: &str| text.lines().filter(|line| line.contains(marker)).count() as u64;
    // A leaf line, or an entry and an exit line when the call moved to
    // another CPU inside.
    let graph_calls = traced(&graph, "torture_target();") + traced(&graph, "torture_target() {");
    let graph_exits = traced(&graph, "} /* kernel::tests::ftrace::torture::torture_target */");
    assert_eq!(graph_calls, CALLS, "{name}: the graph tracer's calls:\n{graph}");
    assert_eq!(graph_calls - traced(&graph, "torture_target();"), graph_exits, "{name}: and their exits:\n{graph}");
    assert_eq!(traced(&function, ": kernel::tests::ftrace::torture::torture_target <-"), CALLS, "{name}: the function tracer");
    let (entry, exit) = if full { (REGS_CALLER, RETURN_REGS) } else { (ARGS_CALLER, RETURN) };
    for (region, what) in [(entry, "the entry trampoline"), (exit, "the return trampoline"), (SLOTS, "the kprobe's slot")] {
        assert!(REGION_STEPS[region].load(Ordering::SeqCst) >= CALLS, "{name}: steps in {what}");
    }
    for (region, what) in [(entry, "the entry trampoline"), (exit, "the return trampoline")] {
        assert_eq!(LAST_STEPS[region].load(Ordering::SeqCst), CALLS, "{name}: {what}'s last instruction, once a call");
    }
    assert_eq!(REAL_CALLS.load(Ordering::SeqCst), CALLS, "{name}: every call entered its trampoline");
    assert_eq!(RETURNED.load(Ordering::SeqCst), CALLS, "{name}: every call came back to its caller");
    if arch::smp::online() > 1 {
        assert!(MIGRATIONS_ASKED.load(Ordering::SeqCst) > 0, "{name}: moved at chosen instructions");
        assert!(CPU_CHANGES.load(Ordering::SeqCst) > 0, "{name}: and ran on another CPU");
    }
}

#[ktest]
fn every_instruction_of_a_call_through_the_sparse_trampolines_with_every_user() {
    torture(false);
}

#[ktest]
fn every_instruction_of_a_call_through_the_full_trampolines_with_every_user() {
    torture(true);
}

// ---- another CPU patching the site under the stepped calls ----

static PATCHER_STOP: AtomicBool = AtomicBool::new(false);

/// Flips `ops` on the target until told to stop; answers how many times.
fn flip_until_stopped(ops: &'static FtraceOps) -> u64 {
    ftrace::set_filter_ips(ops, FilterKind::Filter, &[target()], FilterMode::Replace).unwrap();
    let mut flips = 0;
    while !PATCHER_STOP.load(Ordering::SeqCst) {
        ftrace::register(ops).unwrap();
        ftrace::unregister(ops).unwrap();
        flips += 1;
    }
    flips
}

/// Steps calls of the target, moving between CPUs, while a task on another
/// CPU patches its site: NOP to call and back (an ops alone), then ARGS to
/// REGS and back (a `SAVE_REGS` ops over a sparse one that stays).
#[ktest]
fn stepped_calls_while_another_cpu_patches_the_site() {
    const CALLS: u64 = 25;
    let violations = step::violations();
    USERS_WRONG.store(0, Ordering::SeqCst);
    let patcher_cpu = other_cpu(arch::cpu::id()).unwrap_or(0);
    for (phase, (flipped, kept)) in [(&ARGS_OPS_, None), (&REGS_OPS_, Some(&ARGS_OPS_))].into_iter().enumerate() {
        if let Some(kept) = kept {
            ftrace::set_filter_ips(kept, FilterKind::Filter, &[target()], FilterMode::Replace).unwrap();
            ftrace::register(kept).unwrap();
        }
        PATCHER_STOP.store(false, Ordering::SeqCst);
        let patcher = sched::spawn_on("torture/patcher", 1 << patcher_cpu, move || flip_until_stopped(flipped)).unwrap();
        let bad = with_hook(true, || stepped_calls(CALLS, 0x77 + phase as u64));
        PATCHER_STOP.store(true, Ordering::SeqCst);
        let flips = patcher.join();
        if let Some(kept) = kept {
            ftrace::unregister(kept).unwrap();
        }
        assert_eq!(bad, 0, "phase {phase}: results");
        assert!(flips > 0, "phase {phase}: the site was patched meanwhile");
        assert_eq!(WRONG.load(Ordering::SeqCst), 0, "phase {phase}: {}", wrongs());
        assert_eq!(RETURNED.load(Ordering::SeqCst), CALLS, "phase {phase}: every call came back");
    }
    assert_eq!(step::violations(), violations, "{}", wrongs());
    assert_eq!(USERS_WRONG.load(Ordering::SeqCst), 0, "{}", users_wrong());
}

// ---- a batch frozen half-way ----

/// What the pause hook saw at each pause point of a batch that changed the
/// target's site: the point, and for the call on this CPU and the call on
/// the other, the counts it added to [`COUNTS`] and whether its result was
/// right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Paused {
    point: arch::text::PausePoint,
    here: [u64; 8],
    there: [u64; 8],
    results_ok: bool,
    /// The literal leads to an ops that wants every register while the
    /// site's old instruction, which another CPU may still run, calls the
    /// sparse trampoline.
    regs_ops_on_args: bool,
}

const MAX_PAUSES: usize = 8;
static PAUSED: spin::Mutex<([Option<Paused>; MAX_PAUSES], usize)> = spin::Mutex::new(([None; MAX_PAUSES], 0));

/// The helper on another CPU: steps one call of the target each time it is
/// asked (`REQUEST` above `DONE`), until stopped.
static REQUEST: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicU64 = AtomicU64::new(0);
static HELPER_RESULT_OK: AtomicBool = AtomicBool::new(true);

fn helper() -> u64 {
    while !PATCHER_STOP.load(Ordering::SeqCst) {
        let done = DONE.load(Ordering::SeqCst);
        if REQUEST.load(Ordering::SeqCst) > done {
            let (a, b) = (done + 3, done * 5);
            if stepped_call(a, b) != expected(a, b) {
                HELPER_RESULT_OK.store(false, Ordering::SeqCst);
            }
            DONE.store(done + 1, Ordering::SeqCst);
        }
        core::hint::spin_loop();
    }
    0
}

fn delta(before: [u64; 8]) -> [u64; 8] {
    let now = counts();
    core::array::from_fn(|i| now[i] - before[i])
}

/// The pause hook: if the batch changes the target's site, one stepped call
/// here, then one on the helper's CPU (waited for: the helper runs while
/// this CPU holds the batch).
#[patchable_function_entry(prefix_nops = 0, entry_nops = 0)]
fn at_pause(point: arch::text::PausePoint, patches: &[arch::text::Patch]) {
    let site = target() + CALL_OFFSET;
    let Some(patch) = patches.iter().find(|patch| patch.addr == site) else { return };
    // Data goes first: the literal is the batch's new one already. Here
    // only the sparse ops and the full one trace the target, so a literal
    // that is neither empty nor the sparse ops leads to the full one.
    let old_calls_args =
        arch::ftrace::call_insn(site, trampoline_address(Trampoline::Args)).ok() == patch.old_bytes().try_into().ok();
    let mut literal = [0u8; 8];
    arch::text::read(target() - 8, &mut literal).unwrap();
    let literal = u64::from_ne_bytes(literal);
    let sparse_literal = literal == ftrace::empty_literal() || literal == &ARGS_OPS_ as *const FtraceOps as u64;
    let regs_ops_on_args = old_calls_args && !sparse_literal;
    let before = counts();
    let here_ok = stepped_call(11, 13) == expected(11, 13);
    let here = delta(before);
    let before = counts();
    let asked = REQUEST.fetch_add(1, Ordering::SeqCst) + 1;
    let deadline = arch::time::ticks() + 10 * arch::time::HZ;
    while DONE.load(Ordering::SeqCst) < asked && arch::time::ticks() < deadline {
        core::hint::spin_loop();
    }
    let there = delta(before);
    let results_ok = here_ok && DONE.load(Ordering::SeqCst) >= asked && HELPER_RESULT_OK.load(Ordering::SeqCst);
    let mut paused = PAUSED.lock();
    let (list, len) = &mut *paused;
    if *len < MAX_PAUSES {
        list[*len] = Some(Paused { point, here, there, results_ok, regs_ops_on_args });
        *len += 1;
    }
}

/// Takes what the pause hook saw during `change`.
fn frozen(change: impl FnOnce()) -> Vec<Paused> {
    *PAUSED.lock() = ([None; MAX_PAUSES], 0);
    arch::text::set_pause_hook(Some(at_pause));
    change();
    arch::text::set_pause_hook(None);
    let (list, len) = *PAUSED.lock();
    list[..len].iter().flatten().copied().collect()
}

/// Every transition of the target's site frozen at every pause point of the
/// patching protocol, with the mid-function kprobe in place: a stepped call
/// on the patching CPU and one on another CPU, each balanced (the step
/// hook's checks), right, and running the callbacks of the state the site
/// is going to (or, on another CPU before aarch64's synchronisation, of
/// the state it leaves).
#[ktest]
fn a_batch_frozen_at_every_pause_point_runs_its_sites_right() {
    let violations = step::violations();
    USERS_WRONG.store(0, Ordering::SeqCst);
    HELPER_RESULT_OK.store(true, Ordering::SeqCst);
    PATCHER_STOP.store(false, Ordering::SeqCst);
    let helper_cpu = other_cpu(arch::cpu::id()).unwrap_or(0);
    let helper = sched::spawn_on("torture/helper", 1 << helper_cpu, helper).unwrap();
    let config = KprobeConfig { pre_handler: Some(kprobe_pre), post_handler: Some(kprobe_post), private: 0 };
    let kprobe = kprobes::register_kprobe(&Location::Address(after_site()), config).unwrap();
    for ops in [&ARGS_OPS_, &REGS_OPS_] {
        ftrace::set_filter_ips(ops, FilterKind::Filter, &[target()], FilterMode::Replace).unwrap();
    }
    let mut seen = Vec::new();
    with_hook(false, || {
        // (what changes; the per-call counts of the state the batch goes
        // to, of the state it leaves, and once the change is complete). The
        // switch to the full trampoline keeps the sparse ops's literal while
        // its call changes; the list naming both follows in a batch of data.
        let kprobe_hits = |args: u64, regs: u64| [0, 0, 0, 1, 1, 0, regs, args];
        let transitions: [(&str, fn(), [[u64; 8]; 3]); 4] = [
            ("NOP to ARGS", || ftrace::register(&ARGS_OPS_).unwrap(), [kprobe_hits(1, 0), kprobe_hits(0, 0), kprobe_hits(1, 0)]),
            ("ARGS to REGS", || ftrace::register(&REGS_OPS_).unwrap(), [kprobe_hits(1, 0), kprobe_hits(1, 0), kprobe_hits(1, 1)]),
            (
                "REGS to ARGS",
                || ftrace::unregister(&REGS_OPS_).unwrap(),
                [kprobe_hits(1, 0), kprobe_hits(1, 0), kprobe_hits(1, 0)],
            ),
            (
                "ARGS to NOP",
                || ftrace::unregister(&ARGS_OPS_).unwrap(),
                [kprobe_hits(0, 0), kprobe_hits(0, 0), kprobe_hits(0, 0)],
            ),
        ];
        for (name, change, [new, old, settled]) in transitions {
            let pauses = frozen(change);
            let before = counts();
            let result_ok = stepped_call(5, 6) == expected(5, 6);
            seen.push((name, pauses, new, old, (delta(before), result_ok), settled));
        }
    });
    PATCHER_STOP.store(true, Ordering::SeqCst);
    helper.join();
    kprobe.unregister();
    let points: &[arch::text::PausePoint] = if cfg!(target_arch = "x86_64") {
        use arch::text::PausePoint::*;
        &[BreakpointsIn, TailsWritten, BeforeFirstBytes, FirstBytesWritten]
    } else {
        &[arch::text::PausePoint::Stored]
    };
    for (name, pauses, new, old, (after, after_ok), settled) in &seen {
        assert!(after_ok, "{name}: a call once the change is complete");
        assert_eq!(after, settled, "{name}: once the change is complete, the call runs its new state");
        let at: Vec<_> = pauses.iter().map(|paused| paused.point).collect();
        assert_eq!(at, points, "{name}: the pause points its batch went through");
        for paused in pauses {
            assert!(
                !paused.regs_ops_on_args,
                "{name} at {:?}: the literal leads to an ops that wants every register while a CPU may still call the sparse \
                 trampoline",
                paused.point
            );
            assert!(paused.results_ok, "{name} at {:?}: results", paused.point);
            assert_eq!(paused.here, *new, "{name} at {:?}: the patching CPU runs the new state", paused.point);
            let settled = cfg!(target_arch = "x86_64") || paused.point != arch::text::PausePoint::Stored;
            assert!(
                paused.there == *new || !settled && paused.there == *old,
                "{name} at {:?}: the other CPU ran {:?}",
                paused.point,
                paused.there
            );
        }
    }
    assert_eq!(WRONG.load(Ordering::SeqCst), 0, "{}", wrongs());
    assert_eq!(step::violations(), violations, "{}", wrongs());
    assert_eq!(USERS_WRONG.load(Ordering::SeqCst), 0, "{}", users_wrong());
    if cfg!(target_arch = "x86_64") {
        assert!(EMULATED_CALLS.load(Ordering::SeqCst) > 0, "calls the int3 handler emulated were stepped");
    }
}

// ---- a task inside the sparse trampoline while its site goes full ----

/// A task that entered the sparse trampoline and was preempted before it
/// loaded the literal, while the site switched to the full trampoline and
/// its literal came to name an ops that wants every register: when it
/// resumes, that ops does not run (it would get a sparse save) and counts
/// a miss; the sparse ops runs; the call returns right.
#[ktest]
fn a_call_parked_in_the_sparse_trampoline_never_hands_a_full_registers_ops_a_sparse_save() {
    USERS_WRONG.store(0, Ordering::SeqCst);
    for ops in [&ARGS_OPS_, &REGS_OPS_] {
        ftrace::set_filter_ips(ops, FilterKind::Filter, &[target()], FilterMode::Replace).unwrap();
    }
    ftrace::register(&ARGS_OPS_).unwrap();
    reset_watch();
    PARKED.store(0, Ordering::SeqCst);
    PARK_AT.store(trampoline_address(Trampoline::Args), Ordering::SeqCst);
    step::set_hook(Some(on_step));
    let (before, missed) = (counts(), REGS_OPS_.missed());
    let caller = sched::spawn("torture/parked", || u64::from(stepped_call(21, 22) == expected(21, 22))).unwrap();
    let deadline = arch::time::ticks() + 10 * arch::time::HZ;
    while PARKED.load(Ordering::SeqCst) == 0 && arch::time::ticks() < deadline {
        sched::sleep_ms(1);
    }
    let parked = PARKED.load(Ordering::SeqCst);
    assert!(parked != 0, "the call was parked in the sparse trampoline");
    // The switch: the full trampoline, then a literal naming both ops.
    ftrace::register(&REGS_OPS_).unwrap();
    sched::unpark(parked);
    let right = caller.join();
    step::set_hook(None);
    PARK_AT.store(0, Ordering::SeqCst);
    let seen = delta(before);
    let regs_missed = REGS_OPS_.missed() - missed;
    ftrace::unregister(&REGS_OPS_).unwrap();
    ftrace::unregister(&ARGS_OPS_).unwrap();
    assert_eq!(right, 1, "the call returned right");
    assert_eq!(USERS_WRONG.load(Ordering::SeqCst), 0, "{}", users_wrong());
    assert_eq!((seen[ARGS_OPS], seen[REGS_OPS], regs_missed), (1, 0, 1), "the sparse ops ran; the full one was counted missed");
    assert_eq!(WRONG.load(Ordering::SeqCst), 0, "{}", wrongs());
}
