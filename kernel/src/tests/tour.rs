//! The `tour` command: every step shows what it claims, and the site ends
//! as it began.

use alloc::string::String;

use ktest_macros::ktest;

use crate::tests::{read_file as read, write_file as write};
use crate::tour::{self, TourError};

/// The lines of step `n` (from its `== n.` header to the next one).
fn step(text: &str, n: usize) -> String {
    let start = text.find(&alloc::format!("== {n}. ")).unwrap_or_else(|| panic!("no step {n}: {text}"));
    let rest = &text[start..];
    let end = rest[3..].find("\n== ").map_or(rest.len(), |at| at + 3);
    String::from(&rest[..end])
}

#[ktest]
fn the_tour_shows_each_step_and_restores_the_site() {
    let mut out = String::new();
    tour::run(None, &mut out).unwrap();
    let (one, two, three) = (step(&out, 1), step(&out, 2), step(&out, 3));
    let (four, five, six) = (step(&out, 4), step(&out, 5), step(&out, 6));
    assert!(one.contains("ops literal (the compiler's prefix NOPs") || one.contains("ops literal (-> "), "{one}");
    assert!(one.contains("   <- call slot"), "the slot, disassembled: {one}");
    assert!(two.contains(" <ftrace_caller>   <- call slot"), "{two}");
    assert!(two.contains("ops literal (-> the tour's sparse ops)"), "{two}");
    assert!(two.contains("enabled_functions: kernel::workload::fib (1)"), "{two}");
    assert!(three.contains("which reads 0x3"), "fib(3)'s first argument: {three}");
    assert!(three.contains(") = Err(NotSaved): "), "an unsaved register refused: {three}");
    assert!(four.contains(" <ftrace_regs_caller>   <- call slot"), "{four}");
    assert!(four.contains("a second call's PtRegs"), "{four}");
    assert!(five.contains(" <return_to_handler>"), "the hijacked return address: {five}");
    assert!(five.contains("shadow-stack frame: ret=") && five.contains(" <kernel::workload::fib> "), "{five}");
    assert!(five.contains("at exit: returned 2 (0x2) after "), "fib(3) = 2: {five}");
    assert!(six.contains("restored: the ") && six.contains(" byte for byte those of step 1"), "{six}");
    assert_eq!(read("enabled_functions"), "", "nothing left traced");
}

#[ktest]
fn the_tour_refuses_what_it_cannot_put_back() {
    let mut out = String::new();
    assert!(matches!(tour::run(Some("no_such_function"), &mut out), Err(TourError::Name(_))));
    write("set_ftrace_filter", "fib");
    write("current_tracer", "function");
    assert!(matches!(tour::run(None, &mut out), Err(TourError::Busy(_))), "fib is traced already");
    write("current_tracer", "nop");
    write("ftrace_enabled", "0");
    assert!(matches!(tour::run(None, &mut out), Err(TourError::Disabled)), "nothing would be patched");
    write("ftrace_enabled", "1");
    write("current_tracer", "function");
    assert_eq!(out, "", "nothing printed, nothing done");
    assert_eq!(read("enabled_functions").lines().count(), 1, "the tracer's site is as it was");
    write("current_tracer", "nop");
    write("set_ftrace_filter", "");
}
