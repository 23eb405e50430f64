//! Task stacks: the slots the image reserves (`arch::layout::task_stack`),
//! each with a guard page under it, handed out and given back.

use alloc::vec::Vec;

use arch::sync::SpinLock;

/// Which slots are in use.
static IN_USE: SpinLock<Vec<bool>> = SpinLock::new(Vec::new());

/// A task stack slot, given back when dropped.
#[derive(Debug)]
pub struct StackSlot {
    slot: usize,
}

impl StackSlot {
    /// A free slot, if any.
    pub fn allocate() -> Option<StackSlot> {
        let mut in_use = IN_USE.lock();
        if in_use.is_empty() {
            in_use.resize(arch::layout::task_stack_count(), false);
        }
        let slot = in_use.iter().position(|&used| !used)?;
        in_use[slot] = true;
        Some(StackSlot { slot })
    }

    /// The lowest usable address.
    pub fn bottom(&self) -> usize {
        arch::layout::task_stack(self.slot).start
    }

    /// One past the highest address (16-byte aligned).
    pub fn top(&self) -> usize {
        arch::layout::task_stack(self.slot).end
    }
}

impl Drop for StackSlot {
    fn drop(&mut self) {
        IN_USE.lock()[self.slot] = false;
    }
}
