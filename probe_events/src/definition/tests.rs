//! The probe event language's host tests.

use super::fetch_arg::*;
use super::*;
use alloc::vec;

fn define(line: &str) -> EventSpec {
    match parse(line) {
        Ok(Command::Define(spec)) => spec,
        other => panic!("{line}: {other:?}"),
    }
}

#[test]
fn the_done_when_definitions() {
    let entry = define("f:fibent kernel::workload::fib n=$arg1");
    assert_eq!((entry.group.as_str(), entry.event.as_str(), entry.exit), ("fprobes", "fibent", false));
    assert_eq!(entry.symbol, "kernel::workload::fib");
    assert_eq!(
        entry.args,
        vec![FetchArg { name: "n".into(), source: Source::Arg(1), ty: ArgType::Hex(64), count: 0, text: "$arg1".into() }]
    );
    let exit = define("f:fibret kernel::workload::fib%return n=$arg1 ret=$retval");
    assert!(exit.exit);
    assert_eq!(exit.args[1].source, Source::Retval);
    assert_eq!(exit.to_string(), "f:fprobes/fibret kernel::workload::fib%return n=$arg1 ret=$retval");
}

#[test]
fn defaults_groups_types_and_every_fetch_arg() {
    let spec = define("f kernel::workload::fs::lookup");
    assert_eq!((spec.group.as_str(), spec.event.as_str()), ("fprobes", "kernel__workload__fs__lookup__entry"));
    let spec = define("f:mygrp/ev sym%return");
    assert_eq!((spec.group.as_str(), spec.event.as_str(), spec.exit), ("mygrp", "ev", true));
    assert_eq!(define("f:g/ sym%return").event, "sym__exit");
    let spec = define("f:e sym $arg2:u32 s=$stack3:s16 $stack p=%di:x8 m=+8($arg1):u8 d=-0x10(+0(%sp)):string f=$arg1:symbol");
    let sources: Vec<(&str, &Source, ArgType)> = spec.args.iter().map(|a| (a.name.as_str(), &a.source, a.ty)).collect();
    assert_eq!(sources[0], ("arg1", &Source::Arg(2), ArgType::Unsigned(32)));
    assert_eq!(sources[1], ("s", &Source::Stack(3), ArgType::Signed(16)));
    assert_eq!(sources[2], ("arg3", &Source::StackPointer, ArgType::Hex(64)));
    assert_eq!(sources[3], ("p", &Source::Register("di".into()), ArgType::Hex(8)));
    assert_eq!(sources[4].1, &Source::Memory { offset: 8, base: Box::new(Source::Arg(1)) });
    assert_eq!(
        sources[5].1,
        &Source::Memory {
            offset: -16,
            base: Box::new(Source::Memory { offset: 0, base: Box::new(Source::Register("sp".into())) })
        }
    );
    assert_eq!(sources[5].2, ArgType::String);
    assert_eq!(sources[6].2, ArgType::Symbol);
    let array = define("f:e sym a=+8($arg1):x8[4] b=@kernel::X:u64[0x10]");
    assert_eq!((array.args[0].ty, array.args[0].count, array.args[1].count), (ArgType::Hex(8), 4, 16));
    assert_eq!(array.to_string(), "f:fprobes/e sym a=+8($arg1):x8[4] b=@kernel::X:u64[0x10]");
    assert_eq!(define("f:e sym a=+8($arg1):x8").args[0].count, 0, "no brackets: one value");
    for bad in [
        "+0($arg1):x8[4",
        "+0($arg1):x8[4]z",
        "+0($arg1):x8[0]",
        "+0($arg1):x8[65]",
        "+0($arg1):x8[z]",
        "$arg1:x8[2]",
        "+0($arg1):string[2]",
    ] {
        assert!(matches!(parse(&format!("f:e sym a={bad}")), Err(DefinitionError::BadFetchArg { .. })), "{bad}");
    }
    let symstr = define("f:e sym f=$arg1:symstr");
    assert_eq!((symstr.args[0].ty, symstr.to_string().as_str()), (ArgType::SymStr, "f:fprobes/e sym f=$arg1:symstr"));
    assert!(symstr.args[0].ty.is_string() && ArgType::String.is_string() && !ArgType::Symbol.is_string());
    assert_eq!(define("f:e s%return r=$arg1 v=$retval:s32").args[1].ty, ArgType::Signed(32));
    let spec = define("f:e sym g=@kernel::tick::TICKS:u64 h=@COUNT-0x8 a=@0x1000:x32 p=+8(@kernel::X+16):string");
    let sources: Vec<&Source> = spec.args.iter().map(|a| &a.source).collect();
    assert_eq!(sources[0], &Source::Symbol { name: "kernel::tick::TICKS".into(), offset: 0 });
    assert_eq!(spec.args[0].ty, ArgType::Unsigned(64), "the type after the path's last single colon");
    assert_eq!(sources[1], &Source::Symbol { name: "COUNT".into(), offset: -8 });
    assert_eq!((sources[2], spec.args[2].ty), (&Source::Address(0x1000), ArgType::Hex(32)));
    assert_eq!(
        sources[3],
        &Source::Memory { offset: 8, base: Box::new(Source::Symbol { name: "kernel::X".into(), offset: 16 }) }
    );
    assert_eq!(define("f:e sym s=@NAME:string").args[0].ty, ArgType::String, "a static is memory: a string may be read there");
    let spec = define("f:e sym c=+0($arg1):char b=$arg2:b4@2/32");
    assert_eq!((spec.args[0].ty, spec.args[0].ty.size()), (ArgType::Char, 1));
    let bits = spec.args[1].ty;
    assert_eq!((bits, bits.size(), bits.name()), (ArgType::Bitfield { width: 4, offset: 2, container: 32 }, 4, "b4@2/32".into()));
    assert_eq!(bits.extract(0b1101_0110), 0b0101, "bits 2..6");
    assert_eq!(ArgType::Bitfield { width: 64, offset: 0, container: 64 }.extract(u64::MAX), u64::MAX);
    assert_eq!(define("f:e sym b=$arg1:b0x4@010/32").args[0].ty, ArgType::Bitfield { width: 4, offset: 8, container: 32 });
    let spec = define("f:e sym a=@0100 b=@X+010 c=+0X10($arg1)");
    let sources: Vec<&Source> = spec.args.iter().map(|a| &a.source).collect();
    assert_eq!(sources[0], &Source::Address(0o100), "numbers are read as C reads them");
    assert_eq!(sources[1], &Source::Symbol { name: "X".into(), offset: 8 });
    assert_eq!(sources[2], &Source::Memory { offset: 16, base: Box::new(Source::Arg(1)) });
    assert_eq!(ArgType::Bitfield { width: 1, offset: 63, container: 64 }.extract(1 << 63), 1);
}

#[test]
fn kprobe_and_kretprobe_definitions() {
    let spec = define("p:kprobes/fibmid kernel::workload::fib+16 n=%di sp=$stack");
    assert_eq!(spec.kind, ProbeKind::Kprobe(Location::Symbol { symbol: "kernel::workload::fib".into(), offset: 16 }));
    assert_eq!((spec.group.as_str(), spec.event.as_str(), spec.exit), ("kprobes", "fibmid", false));
    assert_eq!(spec.to_string(), "p:kprobes/fibmid kernel::workload::fib+16 n=%di sp=$stack");
    let spec = define("p fib+0x10");
    assert_eq!((spec.group.as_str(), spec.event.as_str()), ("kprobes", "p_fib_16"));
    assert_eq!(define("p 0x1000").event, "p_0x1000");
    let spec = define("r:fibret fib $retval");
    assert_eq!(spec.kind, ProbeKind::Kretprobe { location: Location::Symbol { symbol: "fib".into(), offset: 0 }, maxactive: 0 });
    assert!(spec.exit);
    assert_eq!(spec.to_string(), "r:kprobes/fibret fib arg1=$retval", "unnamed args show their names, as Linux");
    let spec = define("r16 fib");
    assert_eq!((spec.event.as_str(), spec.to_string().as_str()), ("r_fib_0", "r16:kprobes/r_fib_0 fib"));
    assert_eq!(parse_as("p:a fib", Syntax::Kprobe).map(|_| ()), Ok(()));
    let spec = define("p:pret fib%return r=$retval");
    assert_eq!(spec.to_string(), "r:kprobes/pret fib r=$retval", "p SYM%return is a kretprobe, as Linux lists it");
    assert!(matches!(parse("r:a fib%ret"), Err(DefinitionError::BadLocation(_))));
}

#[test]
fn bad_kprobe_definitions_are_refused() {
    use DefinitionError::*;
    let refused = parse_as("f:a fib", Syntax::Kprobe);
    assert_eq!(refused, Err(UnknownType { head: "f:a".into(), syntax: Syntax::Kprobe }));
    assert!(refused.unwrap_err().to_string().contains("expected 'p' or 'r'"), "kprobe_events does not offer 'f'");
    assert!(matches!(parse("p:a fib+zz"), Err(BadLocation(_))));
    assert!(matches!(parse("p:a fib-4"), Err(BadLocation(_))));
    assert_eq!(parse("p:a fib $retval"), Err(RetvalAtEntry("$retval".into())));
    assert_eq!(parse("p4:a fib"), Err(BadMaxactive("p4:a".into(), Maxactive::OnlyForReturn)));
    assert_eq!(parse("r0:a fib"), Err(BadMaxactive("r0:a".into(), Maxactive::Invalid)));
    assert_eq!(parse("r99999:a fib"), Err(BadMaxactive("r99999:a".into(), Maxactive::TooBig)));
    assert_eq!(
        parse("r99999999999999999999999:a fib"),
        Err(BadMaxactive("r99999999999999999999999:a".into(), Maxactive::Invalid))
    );
    assert_eq!(parse("r1x:a fib"), Err(BadMaxactive("r1x:a".into(), Maxactive::Invalid)));
    assert_eq!(parse("p0x10:a fib"), Err(BadMaxactive("p0x10:a".into(), Maxactive::OnlyForReturn)), "MAXACTIVE on a p: probe");
    // As C writes numbers, as Linux reads MAXACTIVE: 0x10 is 16, 020 is 16.
    for head in ["r16", "r0x10", "r020"] {
        match parse(&format!("{head}:a fib")) {
            Ok(Command::Define(EventSpec { kind: ProbeKind::Kretprobe { maxactive: 16, .. }, .. })) => {}
            other => panic!("{head}: {other:?}"),
        }
    }
    assert_eq!(parse("rx:a fib"), Err(UnknownType { head: "rx:a".into(), syntax: Syntax::Dynamic }));
    assert_eq!(parse("p:a"), Err(MissingSymbol));
    assert!(matches!(parse("p:a fib %"), Err(BadFetchArg { .. })));
}

#[test]
fn numbers_in_fetch_args_take_one_sign_and_digits() {
    let accepted = |arg: &str| parse(&format!("f:a fib x={arg}")).is_ok();
    for good in ["+8($arg1)", "-0x10(%di)", "$stack4095", "$arg12", "-0x8000000000000000($arg1)", "-9223372036854775808($arg1)"] {
        assert!(accepted(good), "{good}");
    }
    for bad in [
        "+-8($arg1)",
        "--8($arg1)",
        "+0x-8($arg1)",
        "--9223372036854775808($arg1)",
        "+0x8000000000000000($arg1)",
        "-0x8000000000000001($arg1)",
        "$arg+1",
        "$stack+2",
        "$stack4096",
    ] {
        assert!(!accepted(bad), "{bad}");
    }
}

#[test]
fn removal() {
    assert_eq!(parse("-:fibent"), Ok(Command::Remove { group: None, event: "fibent".into(), matching: vec![] }));
    assert_eq!(
        parse("-:fprobes/fibent"),
        Ok(Command::Remove { group: Some("fprobes".into()), event: "fibent".into(), matching: vec![] })
    );
    let matching = vec![String::from("fib"), String::from("n=$arg1")];
    assert_eq!(parse("-:fibent fib n=$arg1"), Ok(Command::Remove { group: None, event: "fibent".into(), matching }));
    assert!(parse("-:").is_err());
    let group = Command::Remove { group: Some("a".into()), event: String::new(), matching: vec![] };
    assert_eq!(parse("-:a/"), Ok(group), "every event of group a, as in Linux");
    assert!(parse("-:/").is_err());
}

#[test]
fn bad_definitions_are_refused_with_a_reason() {
    use DefinitionError::*;
    assert_eq!(parse(""), Err(Empty));
    assert_eq!(parse("x:kprobe sym"), Err(UnknownType { head: "x:kprobe".into(), syntax: Syntax::Dynamic }));
    assert_eq!(parse("f:1bad sym"), Err(BadName("1bad".into())));
    assert_eq!(parse("f:a/b/c sym"), Err(BadName("a/b/c".into())));
    assert_eq!(parse("f:ev"), Err(MissingSymbol));
    assert_eq!(parse("f:ev %return"), Err(BadSymbol("%return".into())));
    assert_eq!(parse("f:ev sym $retval"), Err(RetvalAtEntry("$retval".into())));
    assert_eq!(parse("f:ev sym x=+8($retval)"), Err(RetvalAtEntry("x=+8($retval)".into())));
    assert!(matches!(parse("f:ev sym $arg0"), Err(BadFetchArg { .. })));
    assert!(matches!(parse("f:ev sym $argx"), Err(BadFetchArg { .. })));
    assert!(matches!(parse("f:ev sym $bogus"), Err(BadFetchArg { .. })));
    assert!(matches!(parse("f:ev sym x=$arg1:b+4@0/8"), Err(BadArgType { .. })), "no sign, as C's digits");
    for bad in ["@", "@+8", "@0xzz", "@12ab", "@-4", "@0x+10", "@09"] {
        assert!(matches!(parse(&format!("f:ev sym x={bad}")), Err(BadFetchArg { .. })), "{bad}");
    }
    assert!(matches!(parse("f:ev sym +8($arg1"), Err(BadFetchArg { .. })));
    assert!(matches!(parse("f:ev sym +z($arg1)"), Err(BadFetchArg { .. })));
    assert!(matches!(parse("f:ev sym 9"), Err(BadFetchArg { .. })));
    assert!(matches!(parse("f:ev sym 1x=$arg1"), Err(BadFetchArg { .. })));
    assert!(matches!(parse("f:ev sym +0(+0(+0(+0(+0($arg1)))))"), Err(BadFetchArg { .. })));
    assert_eq!(parse("f:ev sym $arg1:u7"), Err(BadArgType { arg: "$arg1:u7".into(), ty: "u7".into() }));
    for bad in ["b0@0/8", "b4@5/8", "b65@0/64", "b4@0/24", "b4/8", "b4@0", "bx@0/8"] {
        let arg = format!("$arg1:{bad}");
        assert_eq!(parse(&format!("f:ev sym {arg}")), Err(BadArgType { arg, ty: bad.into() }), "{bad}");
    }
    assert_eq!(parse("f:ev sym a=$arg1 a=$arg2"), Err(DuplicateArgName("a".into())));
    let longest = format!("{}=$arg1", "a".repeat(MAX_ARG_NAME));
    assert!(parse(&format!("f:ev sym {longest}")).is_ok());
    assert!(matches!(parse(&format!("f:ev sym a{longest}")), Err(BadFetchArg { .. })), "33 characters: too long");
    let many: String = (1..=17).map(|i| alloc::format!(" a{i}=$arg1")).collect();
    assert_eq!(parse(&alloc::format!("f:ev sym{many}")), Err(TooManyArgs));
    let long = alloc::format!("f:ev sym {}", "x".repeat(MAX_DEFINITION));
    assert_eq!(parse(&long), Err(TooLong));
}

#[test]
fn linux_refusals_of_names_and_strings() {
    use DefinitionError::*;
    assert_eq!(parse("p: fib"), Err(NoEventName));
    assert_eq!(parse("f: fib"), Err(NoEventName));
    assert_eq!(define("p:grp/ fib").event, "p_fib_0", "a group and no name: the default name");
    let name = "e".repeat(MAX_NAME);
    assert_eq!(define(&alloc::format!("f:{name} fib")).event, name);
    let long = "e".repeat(MAX_NAME + 1);
    assert_eq!(parse(&alloc::format!("f:{long} fib")), Err(NameTooLong(long.clone())));
    assert_eq!(parse(&alloc::format!("f:{long}/ev fib")), Err(NameTooLong(long)));
    for plain in ["$arg1:string", "s=%di:string", "$stack0:string"] {
        assert!(matches!(parse(&alloc::format!("f:ev fib {plain}")), Err(StringNeedsDereference(_))), "{plain}");
    }
    assert!(matches!(parse("f:ev fib%return $retval:string"), Err(StringNeedsDereference(_))));
    assert_eq!(define("f:ev fib s=+0($arg1):string").to_string(), "f:fprobes/ev fib s=+0($arg1):string");
    let comm = define("f:ev fib $comm c=$comm:string");
    assert_eq!((comm.args[0].source.clone(), comm.args[0].ty), (Source::Comm, ArgType::String), "a string by default");
    assert_eq!(comm.args[1].ty, ArgType::String);
    assert!(matches!(parse("f:ev fib $comm:u32"), Err(BadFetchArg { .. })));
    assert!(matches!(parse("f:ev fib +0($comm)"), Err(BadFetchArg { .. })));
}

#[test]
fn a_kretprobe_may_say_percent_return_too() {
    for (line, shown) in [
        ("r:ev fib%return n=$retval", "r:kprobes/ev fib n=$retval"),
        ("r8:ev fib+0%return", "r8:kprobes/ev fib"),
        ("p:ev fib%return", "r:kprobes/ev fib"),
    ] {
        let spec = define(line);
        assert!(spec.exit, "{line}");
        assert_eq!(spec.to_string(), shown);
    }
    assert_eq!(define("r fib%return").event, "r_fib_0");
}

#[test]
fn comm_in_capitals_is_comm() {
    use DefinitionError::*;
    let spec = define("p:ev fib c=$COMM d=$COMM:string");
    assert_eq!((spec.args[0].source.clone(), spec.args[0].ty), (Source::Comm, ArgType::String));
    assert_eq!(spec.args[1].ty, ArgType::String);
    assert_eq!(spec.to_string(), "p:kprobes/ev fib c=$COMM d=$COMM:string");
    assert!(matches!(parse("p:ev fib $COMM:u32"), Err(BadFetchArg { .. })));
    assert!(matches!(parse("p:ev fib +0($COMM)"), Err(BadFetchArg { .. })));
}

#[test]
fn a_dot_separates_group_and_event_in_a_definition() {
    use DefinitionError::*;
    let spec = define("p:mygrp.ev fib");
    assert_eq!((spec.group.as_str(), spec.event.as_str()), ("mygrp", "ev"));
    assert_eq!(spec.to_string(), "p:mygrp/ev fib");
    let spec = define("f:mygrp. fib");
    assert_eq!((spec.group.as_str(), spec.event.as_str()), ("mygrp", "fib__entry"));
    assert_eq!(parse("p:.ev fib"), Err(BadName(".ev".into())));
    assert_eq!(parse("p:a/b.c fib"), Err(BadName("a/b.c".into())), "'/' first, then the event must be a name");
    // A removal splits at '/' only, as Linux's does.
    assert!(matches!(parse("-:mygrp.ev"), Err(BadName(_))));
}
