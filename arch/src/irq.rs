//! Interrupt masking with RAII guards. (What every interrupt does on its
//! way out is `crate::irq_exit`.)

use crate::cpu;

/// Interrupts stay masked on this CPU while the guard lives; dropping it puts
/// the interrupt flag back as it was (so guards nest).
pub struct IrqGuard {
    was_enabled: bool,
}

impl IrqGuard {
    /// Masks interrupts, remembering whether they were enabled.
    #[inline(always)]
    pub fn new() -> Self {
        let was_enabled = cpu::interrupts_enabled();
        cpu::disable_interrupts();
        Self { was_enabled }
    }
}

impl Default for IrqGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for IrqGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.was_enabled {
            cpu::enable_interrupts();
        }
    }
}

/// Runs `f` with interrupts masked.
#[inline(always)]
pub fn without_interrupts<R>(f: impl FnOnce() -> R) -> R {
    let _guard = IrqGuard::new();
    f()
}
