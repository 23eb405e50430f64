//! The GDT and TSS of each CPU. Long mode needs a code and a data segment;
//! the TSS only supplies the interrupt stack for double faults, so a stack
//! overflow is reported instead of triple-faulting. Each CPU has its own
//! TSS (a TSS descriptor is busy while loaded) and so its own GDT.

use spin::Once;
use x86_64::instructions::segmentation::{Segment, CS, DS, ES, SS};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::tss::TaskStateSegment;
use x86_64::VirtAddr;

use crate::MAX_CPUS;

/// IST slot (1-based in the IDT entry) for the double-fault stack.
pub(crate) const DOUBLE_FAULT_IST: u16 = 1;

const DOUBLE_FAULT_STACK_SIZE: usize = 16 * 1024;

#[repr(C, align(16))]
struct Stack([u8; DOUBLE_FAULT_STACK_SIZE]);

static DOUBLE_FAULT_STACKS: [crate::cell::BootCell<Stack>; MAX_CPUS] =
    [const { crate::cell::BootCell::new(Stack([0; DOUBLE_FAULT_STACK_SIZE])) }; MAX_CPUS];

static TSS: [Once<TaskStateSegment>; MAX_CPUS] = [const { Once::new() }; MAX_CPUS];
static GDT: [Once<(GlobalDescriptorTable, Selectors)>; MAX_CPUS] = [const { Once::new() }; MAX_CPUS];

struct Selectors {
    code: SegmentSelector,
    data: SegmentSelector,
    tss: SegmentSelector,
}

/// Loads CPU `cpu`'s GDT and TSS and reloads every segment register.
pub(crate) fn init(cpu: usize) {
    let tss = TSS[cpu].call_once(|| {
        let mut tss = TaskStateSegment::new();
        let stack = DOUBLE_FAULT_STACKS[cpu].as_ptr() as u64;
        tss.interrupt_stack_table[usize::from(DOUBLE_FAULT_IST - 1)] = VirtAddr::new(stack + DOUBLE_FAULT_STACK_SIZE as u64);
        tss
    });
    let (gdt, selectors) = GDT[cpu].call_once(|| {
        let mut gdt = GlobalDescriptorTable::new();
        let code = gdt.append(Descriptor::kernel_code_segment());
        let data = gdt.append(Descriptor::kernel_data_segment());
        let tss = gdt.append(Descriptor::tss_segment(tss));
        (gdt, Selectors { code, data, tss })
    });
    gdt.load();
    // SAFETY: the selectors index the descriptors just loaded, so every
    // segment register ends up naming a valid flat segment and the TSS.
    unsafe {
        CS::set_reg(selectors.code);
        DS::set_reg(selectors.data);
        ES::set_reg(selectors.data);
        SS::set_reg(selectors.data);
        load_tss(selectors.tss);
    }
}

/// The kernel code selector (for hand-built interrupt frames).
pub(crate) fn kernel_code_selector() -> u16 {
    GDT[0].get().map_or(0x08, |(_, s)| s.code.0)
}
