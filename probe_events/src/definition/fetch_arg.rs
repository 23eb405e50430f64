//! One fetch arg of a probe definition (`NAME=FETCHARG:TYPE`): where the
//! value comes from (an argument, a register, the stack, memory at an
//! address, `$retval`, `$comm`) and its type, with Linux's reasons for
//! what it refuses.

use super::{is_identifier, ArgType, DefinitionError, FetchArg, Source, MAX_DEREF};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::ToString;

use ftrace::number::{c_digits as c_number, c_long};

pub use kprobes::location::{Location, LocationError};

/// The most values an array type (`:TYPE[N]`) holds (Linux's `MAX_ARRAY_LEN`).
pub const MAX_ARRAY: usize = 64;

/// Splits `TYPE[N]` into `TYPE` and `N` (0 without brackets), with
/// Linux's reasons for a bad array.
fn split_array(ty: &str) -> Result<(&str, usize), &'static str> {
    let Some((base, count)) = ty.split_once('[') else { return Ok((ty, 0)) };
    let count = match count.split_once(']') {
        Some((count, "")) => count,
        Some(_) => return Err("the array has a wrong suffix"),
        None => return Err("the array is not closed"),
    };
    match c_number(count) {
        Some(0) | None => Err("invalid array size"),
        Some(n) if n as usize > MAX_ARRAY => Err("the array number is too big (at most 64)"),
        Some(n) => Ok((base, n as usize)),
    }
}

/// The longest argument name, as Linux's `MAX_ARG_NAME_LEN` allows.
pub(super) const MAX_ARG_NAME: usize = 32;

/// `[NAME=]FETCHARG[:TYPE]`.
pub(super) fn parse_arg(text: &str, position: usize, exit: bool) -> Result<FetchArg, DefinitionError> {
    let bad = |why| DefinitionError::BadFetchArg { arg: text.into(), why };
    let (name, rest) = match text.split_once('=') {
        Some((name, rest)) => {
            if !is_identifier(name) || name.starts_with("__probe") || name.starts_with("common_") {
                return Err(bad("invalid argument name"));
            }
            if name.len() > MAX_ARG_NAME {
                return Err(bad("argument name too long (at most 32 characters)"));
            }
            (name.to_string(), rest)
        }
        None => (format!("arg{position}"), text),
    };
    // The type follows the last single ':' outside parentheses (a `::`
    // is part of an `@SYM`'s path).
    let (body, ty, count) = match ftrace::symbols::glob::split_last_colon(rest) {
        Some((body, ty_text)) => {
            let (base, count) = split_array(ty_text).map_err(bad)?;
            let ty = ArgType::parse(base).ok_or_else(|| DefinitionError::BadArgType { arg: text.into(), ty: ty_text.into() })?;
            (body, Some(ty), count)
        }
        None => (rest, None, 0),
    };
    let source = parse_source(body, 0).map_err(bad)?;
    // `$comm` is a string, as in Linux (its type may be left out).
    let ty = match (&source, ty) {
        (Source::Comm, None | Some(ArgType::String)) => ArgType::String,
        (Source::Comm, Some(_)) => return Err(bad("$comm is a string (:string, or no type)")),
        (_, ty) => ty.unwrap_or(ArgType::Hex(64)),
    };
    if !exit && uses_retval(&source) {
        return Err(DefinitionError::RetvalAtEntry(text.into()));
    }
    if ty == ArgType::String
        && !matches!(source, Source::Memory { .. } | Source::Address(_) | Source::Symbol { .. } | Source::Comm)
    {
        return Err(DefinitionError::StringNeedsDereference(text.into()));
    }
    if count > 0 {
        if ty.is_string() || matches!(ty, ArgType::Bitfield { .. }) {
            return Err(bad("arrays of strings or bitfields are not supported"));
        }
        if !matches!(source, Source::Memory { .. } | Source::Address(_) | Source::Symbol { .. }) {
            return Err(bad("an array is read from memory: +OFFS(FETCHARG), @ADDR or @SYM"));
        }
    }
    Ok(FetchArg { name, source, ty, count, text: rest.into() })
}

fn uses_retval(source: &Source) -> bool {
    match source {
        Source::Retval => true,
        Source::Memory { base, .. } => uses_retval(base),
        _ => false,
    }
}

fn parse_source(text: &str, depth: usize) -> Result<Source, &'static str> {
    if let Some(rest) = text.strip_prefix('$') {
        return match rest {
            "retval" => Ok(Source::Retval),
            "stack" => Ok(Source::StackPointer),
            // Linux takes `$COMM` too.
            "comm" | "COMM" if depth > 0 => Err("$comm is a string, not an address"),
            "comm" | "COMM" => Ok(Source::Comm),
            _ => {
                if let Some(n) = rest.strip_prefix("arg") {
                    let n = parse_index(n).ok_or("expected $argN with N from 1")?;
                    if n == 0 {
                        return Err("arguments count from $arg1");
                    }
                    Ok(Source::Arg(n))
                } else if let Some(n) = rest.strip_prefix("stack") {
                    let n = parse_index(n).filter(|&n| n <= MAX_STACK_INDEX).ok_or("expected $stackN with N up to 4095")?;
                    Ok(Source::Stack(n))
                } else {
                    Err("unknown variable (expected $argN, $retval, $stackN, $stack or $comm)")
                }
            }
        };
    }
    if let Some(register) = text.strip_prefix('%') {
        if !is_identifier(register) {
            return Err("invalid register name");
        }
        return Ok(Source::Register(register.into()));
    }
    if text.starts_with('+') || text.starts_with('-') {
        if depth == MAX_DEREF {
            return Err("memory fetches nested too deep");
        }
        let open = text.find('(').ok_or("expected +OFFS(FETCHARG)")?;
        let inner = text[open + 1..].strip_suffix(')').ok_or("unbalanced parentheses")?;
        let offset = parse_offset(&text[..open]).ok_or("invalid offset")?;
        let base = parse_source(inner, depth + 1)?;
        return Ok(Source::Memory { offset, base: Box::new(base) });
    }
    if let Some(place) = text.strip_prefix('@') {
        return parse_global(place);
    }
    Err("expected $argN, $retval, $stackN, $stack, $comm, %REG, @ADDR, @SYM[+|-OFFS] or +|-OFFS(FETCHARG)")
}

/// What follows the `@` of `@ADDR` (a number, as C reads it) or
/// `@SYM[+|-OFFS]`.
fn parse_global(place: &str) -> Result<Source, &'static str> {
    if place.starts_with(|c: char| c.is_ascii_digit()) {
        return c_number(place).map(Source::Address).ok_or("invalid address after @");
    }
    // An offset is the text after the last + or - that parses as one (a
    // name's own `-` sits in `->`, inside brackets).
    let split = place.rfind(['+', '-']).and_then(|at| Some((&place[..at], parse_offset(&place[at..])?)));
    let (name, offset) = split.unwrap_or((place, 0));
    if name.is_empty() {
        return Err("expected a symbol after @");
    }
    Ok(Source::Symbol { name: name.into(), offset })
}

/// The largest `N` of `$stackN`: words of a task's stack (as Linux's
/// `PARAM_MAX_STACK` bounds it by the stack size).
const MAX_STACK_INDEX: usize = 4095;

/// A decimal index: digits only (no sign, as Linux's `kstrtoul`).
fn parse_index(text: &str) -> Option<usize> {
    text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse().ok()).flatten()
}

/// `+8`, `-0x10`: one sign, then decimal or `0x` hex digits only (so
/// neither `+-8` nor `+0x-8`, and no magnitude that overflows).
fn parse_offset(text: &str) -> Option<i64> {
    match text.split_at_checked(1)? {
        ("+", digits) => i64::try_from(c_number(digits)?).ok(),
        // Down to `-0x8000000000000000`, as Linux's `kstrtol` reads it.
        ("-", _) => c_long(text),
        _ => None,
    }
}
