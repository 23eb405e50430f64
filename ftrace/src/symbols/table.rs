//! The kernel symbol table: addresses, sizes and demangled names of every
//! function in the image, and of its data objects (statics).
//!
//! The kernel is linked once. Afterwards the host tool `tools/ksyms` reads the
//! ELF symbol table and writes this table into the `.kernel_symbols` section
//! that the linker script reserves, so the running kernel can turn addresses
//! into names (backtraces, traces) and names or globs into addresses (filters)
//! with no second link. This module defines the format for both sides: the
//! tool calls [`encode`], the kernel [`Kallsyms::parse`].
//!
//! Layout (native endian, 8-byte aligned):
//! a [`Header`], then `symbol_count` [`Entry`] records of functions sorted
//! by address, then `data_count` records of data objects (statics, for
//! probe events' `@SYM` fetch args) sorted by address, then the names,
//! UTF-8, back to back. Everything but [`Kallsyms::resolve_data`] sees functions
//! only.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::mem::size_of;

/// `KSYMTAB` and the format version.
pub const MAGIC: [u8; 8] = *b"KSYMTAB\x02";

/// The section header.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Header {
    pub magic: [u8; 8],
    pub symbol_count: u64,
    /// Where the names start, from the start of the section.
    pub names_offset: u64,
    pub names_len: u64,
    /// How many entries at the start of `__patchable_function_entries` are
    /// valid (sorted, each the site of a function in `.text`); the rest of the
    /// table is zero.
    pub site_count: u64,
    /// Data objects after the functions.
    pub data_count: u64,
}

/// One symbol.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub address: u64,
    pub size: u32,
    pub name_offset: u32,
    pub name_len: u32,
    pub reserved: u32,
}

/// A symbol as callers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol<'a> {
    pub name: &'a str,
    pub address: usize,
    pub size: usize,
}

impl Symbol<'_> {
    /// Whether `address` falls inside this symbol.
    pub fn contains(&self, address: usize) -> bool {
        address >= self.address && address - self.address < self.size.max(1)
    }
}

/// Why a table could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KallsymsError {
    /// No header (the post-link tool did not run on this image).
    Missing,
    /// The header or an entry points outside the section.
    Truncated,
    /// Entries are not sorted by address.
    Unsorted,
    /// A name is not UTF-8.
    BadName,
    /// The table does not fit the reserved section (tool side).
    TooLarge { needed: usize, available: usize },
}

impl fmt::Display for KallsymsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KallsymsError::Missing => write!(f, "no symbol table (was tools/ksyms run on the kernel image?)"),
            KallsymsError::Truncated => write!(f, "symbol table truncated"),
            KallsymsError::Unsorted => write!(f, "symbol table not sorted by address"),
            KallsymsError::BadName => write!(f, "symbol name is not UTF-8"),
            KallsymsError::TooLarge { needed, available } => {
                write!(f, "symbol table needs {needed} bytes, section has {available}")
            }
        }
    }
}

/// A validated symbol table over the bytes of its section.
#[derive(Clone, Copy)]
pub struct Kallsyms<'a> {
    header: Header,
    /// The functions.
    entries: &'a [Entry],
    /// The data objects.
    data: &'a [Entry],
    names: &'a [u8],
}

fn read_header(bytes: &[u8]) -> Option<Header> {
    if bytes.len() < size_of::<Header>() || !(bytes.as_ptr() as usize).is_multiple_of(8) {
        return None;
    }
    // SAFETY: `Header` is plain old data (integers and bytes), the slice holds
    // at least one, and the pointer is 8-byte aligned (checked above).
    Some(unsafe { core::ptr::read(bytes.as_ptr() as *const Header) })
}

impl<'a> Kallsyms<'a> {
    /// Validates the table in `bytes`: header, bounds, sort order, UTF-8.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, KallsymsError> {
        let header = read_header(bytes).ok_or(KallsymsError::Missing)?;
        if header.magic != MAGIC {
            return Err(KallsymsError::Missing);
        }
        let functions = usize::try_from(header.symbol_count).map_err(|_| KallsymsError::Truncated)?;
        let data = usize::try_from(header.data_count).map_err(|_| KallsymsError::Truncated)?;
        let count = functions.checked_add(data).ok_or(KallsymsError::Truncated)?;
        let entries_end = count
            .checked_mul(size_of::<Entry>())
            .and_then(|len| len.checked_add(size_of::<Header>()))
            .ok_or(KallsymsError::Truncated)?;
        let names_start = header.names_offset as usize;
        let names_end = names_start.checked_add(header.names_len as usize).ok_or(KallsymsError::Truncated)?;
        if entries_end > bytes.len() || names_start < entries_end || names_end > bytes.len() {
            return Err(KallsymsError::Truncated);
        }
        // SAFETY: `Entry` is plain old data; the range was bounds-checked above
        // and starts at offset 48 of an 8-byte-aligned slice, so it is aligned.
        let all = unsafe { core::slice::from_raw_parts(bytes.as_ptr().add(size_of::<Header>()) as *const Entry, count) };
        let (entries, data) = all.split_at(functions);
        let names = &bytes[names_start..names_end];
        let table = Kallsyms { header, entries, data, names };
        let unsorted = |entries: &[Entry]| entries.windows(2).any(|pair| pair[0].address > pair[1].address);
        if unsorted(entries) || unsorted(data) {
            return Err(KallsymsError::Unsorted);
        }
        for entry in all {
            let end = entry.name_offset as usize + entry.name_len as usize;
            let name = names.get(entry.name_offset as usize..end).ok_or(KallsymsError::Truncated)?;
            core::str::from_utf8(name).map_err(|_| KallsymsError::BadName)?;
        }
        Ok(table)
    }

    /// How many valid sites lead the patchable-entry table.
    pub fn site_count(&self) -> usize {
        self.header.site_count as usize
    }

    /// The number of functions.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn symbol(&self, entry: &Entry) -> Symbol<'a> {
        let start = entry.name_offset as usize;
        let bytes = &self.names[start..start + entry.name_len as usize];
        // Validated in `parse`.
        let name = core::str::from_utf8(bytes).unwrap_or("?");
        Symbol { name, address: entry.address as usize, size: entry.size as usize }
    }

    /// The symbol `index` (in address order).
    pub fn get(&self, index: usize) -> Option<Symbol<'a>> {
        self.entries.get(index).map(|entry| self.symbol(entry))
    }

    /// The function containing `address`.
    pub fn lookup(&self, address: usize) -> Option<Symbol<'a>> {
        let after = self.entries.partition_point(|entry| entry.address as usize <= address);
        let symbol = self.symbol(self.entries.get(after.checked_sub(1)?)?);
        symbol.contains(address).then_some(symbol)
    }

    /// The symbol that starts exactly at `address`.
    pub fn at(&self, address: usize) -> Option<Symbol<'a>> {
        self.lookup(address).filter(|symbol| symbol.address == address)
    }

    /// The first symbol called `name`.
    pub fn by_name(&self, name: &str) -> Option<Symbol<'a>> {
        self.iter().find(|symbol| symbol.name == name)
    }

    /// The function `name` names, as a probe definition writes it: a whole
    /// path, or a bare name matching the last path segment of exactly one
    /// function (`fib` for `kernel::workload::fib`), as with C names.
    pub fn resolve(&self, name: &str) -> Result<Symbol<'a>, NameError> {
        self.resolve_in(self.entries, name, "functions")
    }

    /// The data object (a static) `name` names, as [`resolve`](Self::resolve)
    /// finds functions: what a probe event's `@SYM` reads first.
    pub fn resolve_data(&self, name: &str) -> Result<Symbol<'a>, NameError> {
        self.resolve_in(self.data, name, "statics")
    }

    /// `name` among `entries`, whose kind (in the plural) an ambiguous
    /// name's error names.
    fn resolve_in(&self, entries: &[Entry], name: &str, kind: &'static str) -> Result<Symbol<'a>, NameError> {
        let symbols = || entries.iter().map(|entry| self.symbol(entry));
        if let Some(symbol) = symbols().find(|symbol| symbol.name == name) {
            return Ok(symbol);
        }
        if name.contains("::") {
            return Err(NameError::Unknown(name.into()));
        }
        let mut found: Vec<Symbol<'a>> = Vec::new();
        for symbol in symbols().filter(|symbol| crate::symbols::glob::last_segment(symbol.name) == name) {
            if !found.iter().any(|seen| seen.name == symbol.name) {
                found.push(symbol);
            }
        }
        match found.len() {
            0 => Err(NameError::Unknown(name.into())),
            1 => Ok(found[0]),
            _ => Err(NameError::Ambiguous { name: name.into(), kind, matches: found.iter().map(|s| s.name.into()).collect() }),
        }
    }

    /// Every symbol, in address order.
    pub fn iter(&self) -> impl Iterator<Item = Symbol<'a>> + '_ {
        self.entries.iter().map(|entry| self.symbol(entry))
    }
}

/// Why [`Kallsyms::resolve`] (or [`resolve_data`](Kallsyms::resolve_data))
/// found no one symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameError {
    /// No symbol of the kind has that name or last path segment.
    Unknown(String),
    /// A bare name that ends several paths: these, of `kind` (`functions`,
    /// `statics`).
    Ambiguous { name: String, kind: &'static str, matches: Vec<String> },
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Unknown(name) => write!(f, "unknown symbol '{name}'"),
            NameError::Ambiguous { name, kind, matches } => {
                write!(f, "'{name}' matches {} {kind}, give the whole path:", matches.len())?;
                const SHOWN: usize = 8;
                for found in matches.iter().take(SHOWN) {
                    write!(f, " {found}")?;
                }
                if matches.len() > SHOWN {
                    write!(f, " (and {} more)", matches.len() - SHOWN)?;
                }
                Ok(())
            }
        }
    }
}

/// Writes `function+0xOFF/0xSIZE` for `address`, or the bare address.
pub fn write_address(out: &mut dyn fmt::Write, table: Option<&Kallsyms<'_>>, address: usize) -> fmt::Result {
    write_symbol(out, table.and_then(|t| t.lookup(address)), address)
}

/// [`write_address`] for a return address (a caller in a backtrace): it
/// points after the call, so the function is looked up one byte back. A
/// call that is its function's last instruction (a call that never
/// returns) then still names its own function, not the next one.
pub fn write_return_address(out: &mut dyn fmt::Write, table: Option<&Kallsyms<'_>>, address: usize) -> fmt::Result {
    write_symbol(out, table.and_then(|t| t.lookup(address.checked_sub(1)?)), address)
}

fn write_symbol(out: &mut dyn fmt::Write, symbol: Option<Symbol<'_>>, address: usize) -> fmt::Result {
    match symbol {
        Some(symbol) => write!(out, "{}+{:#x}/{:#x}", symbol.name, address - symbol.address, symbol.size),
        None => write!(out, "{address:#x}"),
    }
}

/// Builds the section contents for the functions `symbols` and the data
/// objects `data` (any order; sorted here) with `site_count` valid sites.
/// Used by the post-link tool.
pub fn encode(symbols: &[Symbol<'_>], data: &[Symbol<'_>], site_count: usize, capacity: usize) -> Result<Vec<u8>, KallsymsError> {
    fn sorted_group<'s>(group: &'s [Symbol<'_>]) -> Vec<(usize, usize, &'s str)> {
        let mut sorted: Vec<(usize, usize, &str)> = group.iter().map(|s| (s.address, s.size, s.name)).collect();
        sorted.sort_by_key(|&(address, _, name)| (address, name));
        sorted
    }
    let sorted: Vec<(usize, usize, &str)> = sorted_group(symbols).into_iter().chain(sorted_group(data)).collect();
    let names_offset = size_of::<Header>() + sorted.len() * size_of::<Entry>();
    let mut names = Vec::new();
    let mut entries = Vec::with_capacity(sorted.len());
    for &(address, size, name) in &sorted {
        entries.push(Entry {
            address: address as u64,
            size: size as u32,
            name_offset: names.len() as u32,
            name_len: name.len() as u32,
            reserved: 0,
        });
        names.extend_from_slice(name.as_bytes());
    }
    let needed = names_offset + names.len();
    if needed > capacity {
        return Err(KallsymsError::TooLarge { needed, available: capacity });
    }
    let header = Header {
        magic: MAGIC,
        symbol_count: symbols.len() as u64,
        names_offset: names_offset as u64,
        names_len: names.len() as u64,
        site_count: site_count as u64,
        data_count: data.len() as u64,
    };
    let mut out = Vec::with_capacity(needed);
    out.extend_from_slice(as_bytes(&header));
    for entry in &entries {
        out.extend_from_slice(as_bytes(entry));
    }
    out.extend_from_slice(&names);
    Ok(out)
}

/// The bytes of a plain-old-data record.
fn as_bytes<T: Copy>(value: &T) -> &[u8] {
    // SAFETY: only used on `Header` and `Entry`, `repr(C)` records of integers
    // with no padding, so every byte is initialised.
    unsafe { core::slice::from_raw_parts(value as *const T as *const u8, size_of::<T>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An 8-byte-aligned copy of `bytes`, as the section is in the kernel.
    fn aligned(bytes: &[u8]) -> Vec<u64> {
        let mut words = alloc::vec![0u64; bytes.len().div_ceil(8)];
        // SAFETY: `words` has room for every byte.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr() as *mut u8, bytes.len()) };
        words
    }

    fn as_slice(words: &[u64], len: usize) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialised bytes.
        unsafe { core::slice::from_raw_parts(words.as_ptr() as *const u8, len) }
    }

    fn sample() -> [Symbol<'static>; 3] {
        [
            Symbol { name: "kernel::workload::fib", address: 0x2000, size: 0x60 },
            Symbol { name: "kernel::kernel_main", address: 0x1000, size: 0x100 },
            Symbol { name: "kernel::workload::run", address: 0x2060, size: 0x80 },
        ]
    }

    #[test]
    fn round_trip_and_lookup() {
        let bytes = encode(&sample(), &[], 2, 4096).unwrap();
        let words = aligned(&bytes);
        let table = Kallsyms::parse(as_slice(&words, bytes.len())).unwrap();
        assert_eq!(table.len(), 3);
        assert_eq!(table.site_count(), 2);
        assert_eq!(table.get(0).unwrap().name, "kernel::kernel_main");
        assert_eq!(table.lookup(0x2000).unwrap().name, "kernel::workload::fib");
        assert_eq!(table.lookup(0x205f).unwrap().name, "kernel::workload::fib");
        assert_eq!(table.lookup(0x2060).unwrap().name, "kernel::workload::run");
        assert_eq!(table.lookup(0x1100), None, "gap between symbols");
        assert_eq!(table.lookup(0x10), None);
        assert_eq!(table.at(0x2001), None);
        assert_eq!(table.by_name("kernel::workload::run").unwrap().address, 0x2060);
        let mut text = alloc::string::String::new();
        write_address(&mut text, Some(&table), 0x201c).unwrap();
        assert_eq!(text, "kernel::workload::fib+0x1c/0x60");
        // A return address just past fib's last instruction is fib's.
        text.clear();
        write_return_address(&mut text, Some(&table), 0x2060).unwrap();
        assert_eq!(text, "kernel::workload::fib+0x60/0x60");
        text.clear();
        write_address(&mut text, Some(&table), 0x2060).unwrap();
        assert_eq!(text, "kernel::workload::run+0x0/0x80", "an address itself is looked up as it is");
    }

    #[test]
    fn bare_names_resolve_to_one_function_or_list_the_candidates() {
        let mut symbols = sample().to_vec();
        symbols.push(Symbol { name: "kernel::shell::run", address: 0x3000, size: 0x10 });
        let bytes = encode(&symbols, &[], 0, 4096).unwrap();
        let words = aligned(&bytes);
        let table = Kallsyms::parse(as_slice(&words, bytes.len())).unwrap();
        assert_eq!(table.resolve("fib").unwrap().name, "kernel::workload::fib");
        assert_eq!(table.resolve("kernel::workload::run").unwrap().name, "kernel::workload::run");
        assert_eq!(table.resolve("nope"), Err(NameError::Unknown("nope".into())));
        assert_eq!(table.resolve("workload::fib"), Err(NameError::Unknown("workload::fib".into())), "a path is whole");
        let ambiguous = table.resolve("run").unwrap_err();
        assert_eq!(
            alloc::format!("{ambiguous}"),
            "'run' matches 2 functions, give the whole path: kernel::workload::run kernel::shell::run"
        );
    }

    #[test]
    fn data_objects_are_found_by_name_only_through_resolve_data() {
        let data = [
            Symbol { name: "kernel::tick::TICKS", address: 0x9000, size: 8 },
            Symbol { name: "arch::time::TICKS", address: 0x8000, size: 8 },
            Symbol { name: "kernel::COUNT", address: 0x8800, size: 4 },
        ];
        let bytes = encode(&sample(), &data, 0, 4096).unwrap();
        let words = aligned(&bytes);
        let table = Kallsyms::parse(as_slice(&words, bytes.len())).unwrap();
        assert_eq!(table.len(), 3, "functions only");
        assert_eq!(table.lookup(0x8000), None, "a data address is no function");
        assert_eq!(table.resolve("COUNT"), Err(NameError::Unknown("COUNT".into())));
        assert_eq!(table.resolve_data("COUNT").unwrap().address, 0x8800);
        assert_eq!(table.resolve_data("arch::time::TICKS").unwrap().address, 0x8000);
        assert!(matches!(table.resolve_data("TICKS"), Err(NameError::Ambiguous { .. })));
        assert_eq!(table.resolve_data("fib"), Err(NameError::Unknown("fib".into())), "a function is no data");
    }

    #[test]
    fn missing_unsorted_and_too_large_are_errors() {
        let zeros = [0u64; 16];
        assert_eq!(Kallsyms::parse(as_slice(&zeros, 128)).err(), Some(KallsymsError::Missing));
        let bytes = encode(&sample(), &[], 0, 4096).unwrap();
        let mut words = aligned(&bytes);
        // Swap the first two entries' addresses: no longer sorted.
        let entry0 = size_of::<Header>() / 8;
        let entry1 = entry0 + size_of::<Entry>() / 8;
        words.swap(entry0, entry1);
        assert_eq!(Kallsyms::parse(as_slice(&words, bytes.len())).err(), Some(KallsymsError::Unsorted));
        assert!(matches!(encode(&sample(), &[], 0, 64), Err(KallsymsError::TooLarge { .. })));
    }
}
