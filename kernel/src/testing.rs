//! The in-kernel test framework.
//!
//! `cargo test --target ...` builds the kernel with `custom_test_frameworks`:
//! every `#[ktest]` function becomes a [`Test`] and rustc hands them all to
//! [`run_tests`], which QEMU runs (through `tests/qemu-runner.sh`). Each test
//! prints `NAME ... ok` or `NAME ... FAILED`, and the run ends with the line
//! `ARCH: N passed, M failed`, then powers off with success only if M is 0.
//!
//! Panics: there is no unwinding, so a panicking test cannot return. The panic
//! handler calls [`on_panic`], which scores the test (a pass when it expected
//! that panic) and resumes the run with the next test on a fresh stack. A
//! panic raised inside an exception handler (an unhandled fault) resumes the
//! same way. The abandoned stack is never used again; an expected-panic test
//! must not hold locks that later tests need (the console lock is reset).
//! What a panicking test leaves registered is undone by the function its
//! `#[ktest(after_panic = PATH)]` names, which runs before the next test, so
//! a filtered run (any subset of the tests) finds the same clean state as the
//! whole suite.
//!
//! Kernel command-line options: `ktest.filter=TEXT` runs only the tests whose
//! name contains TEXT; `ktest.inject_failure` adds three failing tests (a
//! panic, a `should_panic` test that returns, one with the wrong message),
//! which the test driver uses to prove each failure makes the run fail.

use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::panic::PanicInfo;

use crate::{cmdline, println};

/// One in-kernel test, built by `#[ktest]`.
pub struct Test {
    pub name: &'static str,
    pub function: fn(),
    pub should_panic: ShouldPanic,
    /// What to undo once the test has panicked (`#[ktest(after_panic =
    /// PATH)]`): the runner calls it on a fresh stack before the next test.
    pub after_panic: Option<fn()>,
}

/// Whether a test is expected to panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShouldPanic {
    No,
    Yes,
    /// Expected to panic with a message containing this text.
    WithMessage(&'static str),
}

/// How a test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
}

struct Run {
    tests: Vec<&'static Test>,
    next: usize,
    current: Option<&'static Test>,
    /// The `after_panic` of a test that just panicked, still to run.
    cleanup: Option<fn()>,
    passed: usize,
    failed: usize,
}

static RUN: spin::Mutex<Option<Run>> = spin::Mutex::new(None);

/// What `ktest.inject_failure` adds: one test for each way a test fails
/// (a panic; a `should_panic` test that returns; one that panics with
/// another message), so the runner's failure paths are themselves tested.
static INJECTED_FAILURES: [Test; 3] = [
    Test { name: "testing::injected_failure", function: injected_failure, should_panic: ShouldPanic::No, after_panic: None },
    Test { name: "testing::injected_return", function: injected_return, should_panic: ShouldPanic::Yes, after_panic: None },
    Test {
        name: "testing::injected_wrong_panic",
        function: injected_failure,
        should_panic: ShouldPanic::WithMessage("a message it does not print"),
        after_panic: None,
    },
];

fn injected_failure() {
    panic!("injected failure (ktest.inject_failure)");
}

fn injected_return() {}

/// The `custom_test_frameworks` runner: runs every test, prints the summary
/// and powers off.
pub fn run_tests(tests: &[&Test]) -> ! {
    let filter = cmdline::option("ktest.filter").unwrap_or("");
    // SAFETY: every `&Test` the harness passes points at a `static` emitted by
    // `#[ktest]`, so extending the borrow to 'static is sound.
    let mut selected: Vec<&'static Test> =
        tests.iter().map(|test| unsafe { &*(*test as *const Test) }).filter(|test| test.name.contains(filter)).collect();
    if cmdline::option("ktest.inject_failure").is_some() {
        selected.extend(INJECTED_FAILURES.iter());
    }
    println!("running {} tests", selected.len());
    *RUN.lock() = Some(Run { tests: selected, next: 0, current: None, cleanup: None, passed: 0, failed: 0 });
    continue_tests()
}

/// Runs the remaining tests, then the summary. Also the resumption point after
/// a panic, entered on a fresh stack.
extern "C" fn continue_tests() -> ! {
    loop {
        arch::cpu::enable_interrupts();
        let cleanup = RUN.lock().as_mut().expect("test run initialised").cleanup.take();
        if let Some(cleanup) = cleanup {
            // A panic in here is no test's: it ends the run as a failure.
            cleanup();
        }
        let test = {
            let mut guard = RUN.lock();
            let run = guard.as_mut().expect("test run initialised");
            let Some(&test) = run.tests.get(run.next) else { break };
            run.next += 1;
            run.current = Some(test);
            test
        };
        (test.function)();
        let outcome = match test.should_panic {
            ShouldPanic::No => Outcome::Passed,
            ShouldPanic::Yes | ShouldPanic::WithMessage(_) => {
                println!("note: {} returned but was expected to panic", display_name(test));
                Outcome::Failed
            }
        };
        record(outcome);
    }
    let (passed, failed) = {
        let guard = RUN.lock();
        let run = guard.as_ref().expect("test run initialised");
        (run.passed, run.failed)
    };
    println!("{}: {} passed, {} failed", arch::NAME, passed, failed);
    arch::exit(if failed == 0 { arch::ExitCode::Success } else { arch::ExitCode::Failure })
}

fn display_name(test: &Test) -> &'static str {
    test.name.strip_prefix("kernel::tests::").unwrap_or(test.name)
}

fn record(outcome: Outcome) {
    let mut guard = RUN.lock();
    let run = guard.as_mut().expect("test run initialised");
    let test = run.current.take().expect("a test is running");
    match outcome {
        Outcome::Passed => run.passed += 1,
        Outcome::Failed => run.failed += 1,
    }
    let verdict = if outcome == Outcome::Passed { "ok" } else { "FAILED" };
    println!("{} ... {verdict}", display_name(test));
}

/// Called by the panic handler. Outside a test it returns, and the normal
/// panic path runs; inside one it scores the test and resumes the run.
/// Only the task running the tests can resume them: a panic in any other
/// task (or an interrupt on another CPU) ends the whole run as a failure.
pub fn on_panic(info: &PanicInfo) {
    let on_runner = crate::sched::current().is_some_and(|task| task.pid() == 1);
    if !on_runner {
        return;
    }
    let current = RUN.try_lock().and_then(|guard| guard.as_ref().and_then(|run| run.current));
    let Some(test) = current else { return };
    arch::print::force_unlock();
    let outcome = match test.should_panic {
        ShouldPanic::No => {
            crate::panic::report(info);
            Outcome::Failed
        }
        ShouldPanic::Yes => Outcome::Passed,
        ShouldPanic::WithMessage(expected) => {
            let mut message = MessageBuffer::default();
            let _ = write!(message, "{}", info.message());
            if message.as_str().contains(expected) {
                Outcome::Passed
            } else {
                println!("note: panic message {:?} does not contain {:?}", message.as_str(), expected);
                Outcome::Failed
            }
        }
    };
    record(outcome);
    if let Some(run) = RUN.lock().as_mut() {
        run.cleanup = test.after_panic;
    }
    forget_abandoned_state();
    // SAFETY: the panicking test's stack is abandoned for good: the test
    // framework holds no borrow into it, and `forget_abandoned_state` released
    // what it may have held.
    unsafe { arch::cpu::reset_stack_and_call(continue_tests) }
}

/// Undoes what a test that panicked can leave behind: an exception context
/// never left, a tracing callback or kprobe handler never returned from, an
/// open patch batch, hooked calls that will never return.
fn forget_abandoned_state() {
    crate::sched::renew_current();
    arch::context::reset();
    arch::preempt::reset();
    arch::text::abandon();
    // SAFETY: the panicking test's flow is abandoned (its stack is reset
    // next): none of its hooked calls will return, and no pending hook of
    // it survives the unwound frames.
    unsafe { ftrace::task::current().reset() };
    // SAFETY: as above: a handler or step the test was in is never
    // returned to.
    unsafe { kprobes::probe::forget_abandoned() };
    if ftrace::graph::retstack::is_stopped() {
        // SAFETY: the return hook stopped (a mismatch panicked): no hooked
        // call returns through it any more, and the tests run one at a time
        // with no callback in progress on another CPU.
        unsafe { ftrace::graph::retstack::restart() };
    }
}

/// A fixed-size buffer for formatting a panic message without allocating.
struct MessageBuffer {
    bytes: [u8; 512],
    len: usize,
}

impl Default for MessageBuffer {
    fn default() -> Self {
        Self { bytes: [0; 512], len: 0 }
    }
}

impl MessageBuffer {
    fn as_str(&self) -> &str {
        // Truncation may split a character: keep the valid prefix.
        match core::str::from_utf8(&self.bytes[..self.len]) {
            Ok(s) => s,
            Err(e) => core::str::from_utf8(&self.bytes[..e.valid_up_to()]).unwrap_or(""),
        }
    }
}

impl fmt::Write for MessageBuffer {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let take = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}
