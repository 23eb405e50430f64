//! aarch64 entry for `qemu-system-aarch64 -M virt -kernel kernel.elf`, and
//! for the secondary CPUs PSCI starts.
//!
//! QEMU enters `_start` at EL1, or at EL2 when virtualization is on. At EL2
//! the stub lets EL1 run AArch64 and read the counters, then drops to EL1h. It
//! then installs the boot stack, zeroes `.bss` and calls `arch_entry`. The MMU
//! stays off here; `arch` builds the page tables and turns it on.

core::arch::global_asm!(
    r#"
    /* At EL2, let EL1 run AArch64 and read the counters, then go to EL1h;
       at EL1, nothing. Then SCTLR_EL1: RES1 bits only (MMU, caches and
       alignment checks off). Uses \reg. */
    .macro enter_el1 reg
    mrs \reg, CurrentEL
    lsr \reg, \reg, #2
    cmp \reg, #2
    b.ne 1f
    mov \reg, #(1 << 31)        /* HCR_EL2.RW: EL1 is AArch64 */
    msr hcr_el2, \reg
    mov \reg, #3                /* CNTHCTL_EL2: EL1PCTEN | EL1PCEN */
    msr cnthctl_el2, \reg
    msr cntvoff_el2, xzr
    mov \reg, #0x3c5            /* SPSR: EL1h, DAIF masked */
    msr spsr_el2, \reg
    adr \reg, 1f
    msr elr_el2, \reg
    eret
1:
    ldr \reg, =0x30d00800
    msr sctlr_el1, \reg
    isb
    .endm

    .pushsection .text.boot, "ax"
    .global _start
_start:
    enter_el1 x0
    ldr x0, =__boot_stack_top
    mov sp, x0
    ldr x0, =__bss_start
    ldr x1, =__bss_end
2:  cmp x0, x1
    b.hs 3f
    str xzr, [x0], #8
    b 2b
3:  mov x29, xzr
    mov x30, xzr
    bl arch_entry
4:  wfe
    b 4b

    /* A secondary CPU, started by PSCI CPU_ON with x0 = its number: the
       stack the boot CPU left in secondary_stack_tops, then Rust. */
    .global _start_secondary
_start_secondary:
    mov x19, x0
    enter_el1 x1
    ldr x1, =secondary_stack_tops
    ldr x1, [x1, x19, lsl #3]
    mov sp, x1
    mov x0, x19
    mov x29, xzr
    mov x30, xzr
    bl arch_secondary_entry
5:  wfe
    b 5b
    .popsection
"#
);
