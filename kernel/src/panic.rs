//! The panic handler: message, location, backtrace, then power off with a
//! failure status. Under `cargo test` the test framework decides instead
//! (an expected panic passes its test and the run goes on).

use core::panic::PanicInfo;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::println;

static PANICKING: AtomicBool = AtomicBool::new(false);

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    arch::cpu::disable_interrupts();
    #[cfg(test)]
    crate::testing::on_panic(info);
    report_and_exit(info)
}

/// Prints the panic report and exits QEMU with [`arch::ExitCode::Failure`].
pub fn report_and_exit(info: &PanicInfo) -> ! {
    if PANICKING.swap(true, Ordering::Relaxed) {
        // A panic while reporting a panic: get out without more output.
        arch::exit(arch::ExitCode::Failure);
    }
    report(info);
    arch::exit(arch::ExitCode::Failure)
}

/// Prints `panic: MESSAGE at FILE:LINE:COLUMN` and a backtrace.
pub fn report(info: &PanicInfo) {
    arch::print::force_unlock();
    match info.location() {
        Some(location) => println!("panic: {} at {location}", info.message()),
        None => println!("panic: {}", info.message()),
    }
    crate::backtrace::print_current();
}
