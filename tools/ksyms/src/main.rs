//! `ksyms KERNEL.elf`: the post-link step of every kernel build.
//!
//! 1. Sorts `__patchable_function_entries` in place and drops the entries that
//!    are not the site of a function in `.text` (as Linux's scripts/sorttable
//!    sorts `__mcount_loc`): valid entries first, ascending, then zeros.
//! 2. Writes the kernel symbol table (address, size, demangled Rust path
//!    without the hash, such as `kernel::workload::fs::lookup`) into the
//!    `.kernel_symbols` section the linker script reserves, in the format of
//!    `ftrace::kallsyms`.
//!
//! The kernel then resolves names and addresses with no second link. Running
//! the tool twice on one image is harmless (it yields the same bytes).

use std::collections::BTreeMap;
use std::process::ExitCode;

use ftrace::kallsyms::{self, Symbol};
use goblin::elf::{header, section_header::SectionHeader, sym, Elf};

/// Bytes between a patchable-entry table entry and its function's address:
/// the ops literal (8 bytes of prefix NOPs) on both architectures.
fn site_prefix(machine: u16) -> Result<u64, String> {
    match machine {
        header::EM_X86_64 | header::EM_AARCH64 => Ok(8),
        other => Err(format!("unsupported ELF machine {other}")),
    }
}

fn section<'a>(elf: &'a Elf, name: &str) -> Result<&'a SectionHeader, String> {
    elf.section_headers
        .iter()
        .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(name))
        .ok_or_else(|| format!("no section {name} (is the linker script from boot/ in use?)"))
}

struct Report {
    symbols: usize,
    sites: usize,
    dropped: usize,
}

fn process(image: &mut [u8]) -> Result<Report, String> {
    let elf = Elf::parse(image).map_err(|e| format!("not an ELF file: {e}"))?;
    if !elf.is_64 || !elf.little_endian {
        return Err("expected a little-endian ELF64 kernel".into());
    }
    let prefix = site_prefix(elf.header.e_machine)?;
    let text = section(&elf, ".text")?;
    let text_range = text.sh_addr..text.sh_addr + text.sh_size;
    let sites = section(&elf, "__patchable_function_entries")?.clone();
    let table = section(&elf, ".kernel_symbols")?.clone();

    // Functions in .text, one name per address (the first in symbol order).
    let mut functions: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    for symbol in elf.syms.iter() {
        if symbol.st_type() != sym::STT_FUNC || symbol.st_size == 0 || !text_range.contains(&symbol.st_value) {
            continue;
        }
        let Some(raw) = elf.strtab.get_at(symbol.st_name) else { continue };
        let name = format!("{:#}", rustc_demangle::demangle(raw));
        functions.entry(symbol.st_value).or_insert((symbol.st_size, name));
    }

    let offset = sites.sh_offset as usize;
    let count = sites.sh_size as usize / 8;
    let read = |i: usize| u64::from_le_bytes(image[offset + 8 * i..offset + 8 * i + 8].try_into().unwrap());
    let mut valid: Vec<u64> = (0..count)
        .map(read)
        .filter(|&entry| entry != 0 && functions.contains_key(&(entry + prefix)))
        .collect();
    valid.sort_unstable();
    valid.dedup();
    let dropped = (0..count).map(read).filter(|&e| e != 0).count() - valid.len();
    for i in 0..count {
        let value = valid.get(i).copied().unwrap_or(0);
        image[offset + 8 * i..offset + 8 * i + 8].copy_from_slice(&value.to_le_bytes());
    }

    let symbols: Vec<Symbol> = functions
        .iter()
        .map(|(&address, (size, name))| Symbol { name, address: address as usize, size: *size as usize })
        .collect();
    let bytes = kallsyms::encode(&symbols, valid.len(), table.sh_size as usize).map_err(|e| e.to_string())?;
    let start = table.sh_offset as usize;
    image[start..start + bytes.len()].copy_from_slice(&bytes);
    image[start + bytes.len()..start + table.sh_size as usize].fill(0);
    Ok(Report { symbols: symbols.len(), sites: valid.len(), dropped })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, path] = args.as_slice() else {
        eprintln!("usage: ksyms KERNEL.elf");
        return ExitCode::from(2);
    };
    let mut image = match std::fs::read(path) {
        Ok(image) => image,
        Err(e) => {
            eprintln!("ksyms: cannot read {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match process(&mut image).and_then(|report| {
        std::fs::write(path, &image).map_err(|e| format!("cannot write {path}: {e}"))?;
        Ok(report)
    }) {
        Ok(report) => {
            if std::env::var_os("KSYMS_VERBOSE").is_some() {
                eprintln!(
                    "ksyms: {path}: {} symbols, {} patchable sites ({} entries dropped)",
                    report.symbols, report.sites, report.dropped
                );
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("ksyms: {path}: {message}");
            ExitCode::FAILURE
        }
    }
}
