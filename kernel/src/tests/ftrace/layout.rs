//! `docs/architecture.md`'s diagrams are generated from the types: this
//! test renders them from `offset_of!` and fails, printing the block to
//! paste, when the guide differs.

use alloc::format;
use alloc::string::String;
use core::fmt::Write;
use core::mem::{offset_of, size_of};

use arch::ftrace_abi::{FieldLayout, StructLayout, LAYOUTS};
use ftrace::graph::shadow::{EntryHeader, FrameHeader};
use ktest_macros::ktest;

/// The guide, as the kernel was built with it.
const GUIDE: &str = include_str!("../../../../docs/architecture.md");

const FRAME_HEADER: StructLayout = StructLayout {
    name: "FrameHeader (one per hooked call)",
    size: size_of::<FrameHeader>(),
    fields: &[
        FieldLayout { name: "ret: the real return address", offset: offset_of!(FrameHeader, ret) },
        FieldLayout { name: "func: the function called", offset: offset_of!(FrameHeader, func) },
        FieldLayout { name: "fp: the frame pointer at entry", offset: offset_of!(FrameHeader, fp) },
        FieldLayout { name: "sp: the caller's sp after the return", offset: offset_of!(FrameHeader, sp) },
        FieldLayout { name: "info: depth | full, counted bits", offset: offset_of!(FrameHeader, info) },
        FieldLayout { name: "prev_base: the frame below", offset: offset_of!(FrameHeader, prev_base) },
    ],
};

const ENTRY_HEADER: StructLayout = StructLayout {
    name: "EntryHeader (one per user of the call, then its data words)",
    size: size_of::<EntryHeader>(),
    fields: &[
        FieldLayout { name: "len: data words that follow", offset: offset_of!(EntryHeader, len) },
        FieldLayout { name: "user: its ReturnUser", offset: offset_of!(EntryHeader, user) },
    ],
};

/// One structure as a diagram: a box per field, its offset on the left,
/// its size on the right.
fn draw(layout: &StructLayout, out: &mut String) {
    let width = layout.fields.iter().map(|field| field.name.len()).max().unwrap_or(0).max(24);
    let rule = "-".repeat(width + 2);
    let _ = writeln!(out, "{}, {} bytes", layout.name, layout.size);
    for (i, field) in layout.fields.iter().enumerate() {
        let end = layout.fields.get(i + 1).map_or(layout.size, |next| next.offset);
        let _ = writeln!(out, "  {:>#6x} +{rule}+", field.offset);
        let _ = writeln!(out, "         | {:<width$} | {} bytes", field.name, end - field.offset);
    }
    let _ = writeln!(out, "  {:>#6x} +{rule}+", layout.size);
}

/// The guide's block for `title`: the diagrams between its markers.
fn block(title: &str, layouts: &[&StructLayout]) -> String {
    let mut out =
        format!("<!-- layouts: {title} (generated from the types; kernel/src/tests/ftrace/layout.rs checks it) -->\n```text\n");
    for (i, layout) in layouts.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        draw(layout, &mut out);
    }
    out.push_str("```\n<!-- /layouts -->\n");
    out
}

#[ktest]
fn the_architecture_guide_draws_this_architectures_frames_as_they_are() {
    let expected = block(arch::NAME, &LAYOUTS);
    assert!(GUIDE.contains(&expected), "docs/architecture.md must contain, verbatim:\n{expected}");
}

#[ktest]
fn the_architecture_guide_draws_the_shadow_stack_frame_as_it_is() {
    let expected = block("shadow stack", &[&FRAME_HEADER, &ENTRY_HEADER]);
    assert!(GUIDE.contains(&expected), "docs/architecture.md must contain, verbatim:\n{expected}");
}
