//! x86_64 entry through the PVH boot protocol.
//!
//! QEMU finds the `XEN_ELFNOTE_PHYS32_ENTRY` note, loads the ELF and enters
//! `_start32` in 32-bit protected mode with paging off and `%ebx` holding the
//! physical address of the `hvm_start_info` block. The stub identity-maps the
//! first 4 GiB with 2 MiB pages (enough to run Rust; `arch` replaces these
//! tables with the final ones), enables long mode with NX and write protection,
//! and calls `arch_entry(start_info)`.

core::arch::global_asm!(
    r#"
    .pushsection .note.pvh, "a", @note
    .p2align 2
    .long 4                     /* name size: "Xen\0" */
    .long 4                     /* descriptor size */
    .long 18                    /* XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .long _start32
    .popsection

    .pushsection .text.boot, "ax"
    .code32
    .global _start32
_start32:
    cli
    cld
    /* Zero .bss (page tables and the boot stack live there). */
    movl $__bss_start, %edi
    movl $__bss_end, %ecx
    subl %edi, %ecx
    shrl $2, %ecx
    xorl %eax, %eax
    rep stosl
    movl %ebx, boot_start_info

    /* PML4[0] -> PDPT; PDPT[0..4] -> four page directories of 2 MiB pages. */
    movl $boot_pdpt, %eax
    orl $0x3, %eax
    movl %eax, boot_pml4
    xorl %ecx, %ecx
1:  movl %ecx, %eax
    shll $12, %eax
    addl $boot_pd, %eax
    orl $0x3, %eax
    movl %eax, boot_pdpt(,%ecx,8)
    incl %ecx
    cmpl $4, %ecx
    jb 1b
    xorl %ecx, %ecx
2:  movl %ecx, %eax
    shll $21, %eax
    orl $0x83, %eax             /* present | writable | 2 MiB page */
    movl %eax, boot_pd(,%ecx,8)
    incl %ecx
    cmpl $2048, %ecx
    jb 2b

    movl $boot_pml4, %eax
    movl %eax, %cr3
    movl %cr4, %eax
    orl $(1 << 5), %eax         /* PAE */
    movl %eax, %cr4
    movl $0xC0000080, %ecx      /* IA32_EFER */
    rdmsr
    orl $((1 << 8) | (1 << 11)), %eax   /* LME | NXE */
    wrmsr
    movl %cr0, %eax
    orl $((1 << 31) | (1 << 16) | 1), %eax  /* PG | WP | PE */
    andl $~((1 << 30) | (1 << 29)), %eax    /* caches on: clear CD and NW */
    movl %eax, %cr0
    lgdt boot_gdt_pointer
    ljmp $0x08, $_start64

    .code64
_start64:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    movq $__boot_stack_top, %rsp
    xorl %ebp, %ebp
    movl boot_start_info(%rip), %edi
    call arch_entry
3:  hlt
    jmp 3b
    .popsection

    .pushsection .rodata.boot, "a"
    .p2align 3
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff    /* 0x08: 64-bit kernel code */
    .quad 0x00cf92000000ffff    /* 0x10: kernel data */
boot_gdt_pointer:
    .word boot_gdt_pointer - boot_gdt - 1
    .long boot_gdt
    .popsection

    /* The application-processor trampoline, copied to AP_TRAMPOLINE at run
       time: every absolute address is AP_TRAMPOLINE + (label - start). */
    .set AP_TRAMPOLINE, 0x8000
    .pushsection .rodata.ap_trampoline, "a"
    .p2align 12
    .global ap_trampoline_start
ap_trampoline_start:
    .code16
    cli
    cld
    xorw %ax, %ax
    movw %ax, %ds
    lgdtl (AP_TRAMPOLINE + ap_gdt_pointer - ap_trampoline_start)
    movl %cr0, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl $0x08, $(AP_TRAMPOLINE + ap_protected - ap_trampoline_start)

    .code32
ap_protected:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movl %cr4, %eax
    orl $(1 << 5), %eax             /* PAE */
    movl %eax, %cr4
    movl (AP_TRAMPOLINE + ap_param_cr3 - ap_trampoline_start), %eax
    movl %eax, %cr3
    movl $0xC0000080, %ecx          /* IA32_EFER */
    rdmsr
    orl $((1 << 8) | (1 << 11)), %eax   /* LME | NXE */
    wrmsr
    movl %cr0, %eax
    orl $((1 << 31) | (1 << 16)), %eax  /* PG | WP */
    andl $~((1 << 30) | (1 << 29)), %eax
    movl %eax, %cr0
    ljmpl $0x18, $(AP_TRAMPOLINE + ap_long - ap_trampoline_start)

    .code64
ap_long:
    movq (AP_TRAMPOLINE + ap_param_stack - ap_trampoline_start), %rsp
    movl (AP_TRAMPOLINE + ap_param_cpu - ap_trampoline_start), %edi
    movq (AP_TRAMPOLINE + ap_param_entry - ap_trampoline_start), %rax
    xorl %ebp, %ebp
    callq *%rax
1:  hlt
    jmp 1b

    .p2align 3
ap_gdt:
    .quad 0
    .quad 0x00cf9a000000ffff        /* 0x08: 32-bit code */
    .quad 0x00cf92000000ffff        /* 0x10: data */
    .quad 0x00af9a000000ffff        /* 0x18: 64-bit code */
ap_gdt_pointer:
    .word ap_gdt_pointer - ap_gdt - 1
    .long AP_TRAMPOLINE + ap_gdt - ap_trampoline_start
    .p2align 3
    .global ap_trampoline_params
ap_trampoline_params:               /* filled by the boot CPU: see arch */
ap_param_cr3:   .quad 0
ap_param_stack: .quad 0
ap_param_entry: .quad 0
ap_param_cpu:   .quad 0
    .global ap_trampoline_end
ap_trampoline_end:
    .popsection

    .pushsection .bss.boot, "aw", @nobits
    .p2align 12
    .global boot_pml4
boot_pml4:  .skip 4096
boot_pdpt:  .skip 4096
boot_pd:    .skip 4096 * 4
boot_start_info: .skip 8
    .popsection
"#,
    options(att_syntax)
);
