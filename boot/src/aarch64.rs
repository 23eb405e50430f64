//! aarch64 entry for `qemu-system-aarch64 -M virt -kernel kernel.elf`.
//!
//! QEMU enters `_start` at EL1, or at EL2 when virtualization is on. At EL2
//! the stub lets EL1 run AArch64 and read the counters, then drops to EL1h. It
//! then installs the boot stack, zeroes `.bss` and calls `arch_entry`. The MMU
//! stays off here; `arch` builds the page tables and turns it on.

core::arch::global_asm!(
    r#"
    .pushsection .text.boot, "ax"
    .global _start
_start:
    mrs x0, CurrentEL
    lsr x0, x0, #2
    cmp x0, #2
    b.ne 1f
    mov x0, #(1 << 31)          /* HCR_EL2.RW: EL1 is AArch64 */
    msr hcr_el2, x0
    mov x0, #3                  /* CNTHCTL_EL2: EL1PCTEN | EL1PCEN */
    msr cnthctl_el2, x0
    msr cntvoff_el2, xzr
    mov x0, #0x3c5              /* SPSR: EL1h, DAIF masked */
    msr spsr_el2, x0
    adr x0, 1f
    msr elr_el2, x0
    eret
1:
    ldr x0, =0x30d00800         /* SCTLR_EL1: RES1 bits only; MMU, caches, alignment checks off */
    msr sctlr_el1, x0
    isb
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
    .popsection
"#
);
