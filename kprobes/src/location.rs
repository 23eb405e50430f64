//! Where a probe goes, as `kprobe_events` writes it: `SYM[+OFFS]` or a
//! code address (`0x...`). Parsing checks the text only; `probe` checks the
//! place.

use alloc::string::String;
use core::fmt;

/// A probe's place, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// `SYM[+OFFS]`: `offset` bytes into the function `symbol`.
    Symbol { symbol: String, offset: usize },
    /// A code address.
    Address(usize),
}

/// Why a location was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocationError {
    Empty,
    BadOffset(String),
    BadAddress(String),
}

impl fmt::Display for LocationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocationError::Empty => write!(f, "missing probe location (SYM[+OFFS] or ADDR)"),
            LocationError::BadOffset(text) => write!(f, "invalid offset in '{text}' (expected SYM+OFFS, OFFS a number)"),
            LocationError::BadAddress(text) => write!(f, "invalid address '{text}'"),
        }
    }
}

/// A number as C writes it, as Linux reads a probe's offset or address
/// (`kstrtoul`, base 0: `0x10`, `020` and `16` are the same).
fn parse_number(text: &str) -> Option<usize> {
    ftrace::number::c_digits(text).and_then(|n| usize::try_from(n).ok())
}

impl Location {
    /// Parses `SYM[+OFFS]` or an address (a number starting with a digit).
    pub fn parse(text: &str) -> Result<Location, LocationError> {
        if text.is_empty() {
            return Err(LocationError::Empty);
        }
        if text.starts_with(|c: char| c.is_ascii_digit()) {
            return parse_number(text).map(Location::Address).ok_or_else(|| LocationError::BadAddress(text.into()));
        }
        let (symbol, offset) = match text.rsplit_once('+') {
            Some((symbol, offset)) => (symbol, parse_number(offset).ok_or_else(|| LocationError::BadOffset(text.into()))?),
            None => (text, 0),
        };
        if symbol.is_empty() || symbol.contains(|c: char| c.is_whitespace() || c == '%' || c == '=' || c == '-') {
            return Err(LocationError::BadOffset(text.into()));
        }
        Ok(Location::Symbol { symbol: symbol.into(), offset })
    }
}

impl fmt::Display for Location {
    /// As `kprobe_events` shows it: `SYM+OFFS` (`SYM` alone at offset 0),
    /// or the address in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Symbol { symbol, offset: 0 } => write!(f, "{symbol}"),
            Location::Symbol { symbol, offset } => write!(f, "{symbol}+{offset}"),
            Location::Address(address) => write!(f, "{address:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn symbols_offsets_and_addresses() {
        let at = |symbol: &str, offset| Ok(Location::Symbol { symbol: symbol.into(), offset });
        assert_eq!(Location::parse("kernel::workload::fib"), at("kernel::workload::fib", 0));
        assert_eq!(Location::parse("kernel::workload::fib+16"), at("kernel::workload::fib", 16));
        assert_eq!(Location::parse("fib+0x1c"), at("fib", 0x1c));
        assert_eq!(Location::parse("fib+010"), at("fib", 8), "octal, as Linux's kstrtoul reads it");
        assert_eq!(Location::parse("0xffff800000081000"), Ok(Location::Address(0xffff_8000_0008_1000)));
        assert_eq!(Location::parse("fib+0x1c").unwrap().to_string(), "fib+28");
        assert_eq!(Location::parse("fib+0").unwrap().to_string(), "fib");
        assert_eq!(Location::Address(0x1000).to_string(), "0x1000");
    }

    #[test]
    fn bad_locations_are_refused() {
        assert_eq!(Location::parse(""), Err(LocationError::Empty));
        assert!(matches!(Location::parse("fib+"), Err(LocationError::BadOffset(_))));
        assert!(matches!(Location::parse("fib+0x"), Err(LocationError::BadOffset(_))));
        assert!(matches!(Location::parse("fib+zz"), Err(LocationError::BadOffset(_))));
        assert!(matches!(Location::parse("fib-4"), Err(LocationError::BadOffset(_))));
        assert!(matches!(Location::parse("+4"), Err(LocationError::BadOffset(_))));
        assert!(matches!(Location::parse("0xzz"), Err(LocationError::BadAddress(_))));
        assert!(matches!(Location::parse("12ab"), Err(LocationError::BadAddress(_))));
    }
}
