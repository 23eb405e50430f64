//! `#[ktest]`: marks a `fn()` as an in-kernel test.
//!
//! ```ignore
//! #[ktest]
//! fn heap_round_trip() { ... }
//!
//! #[ktest(should_panic)]
//! fn panics() { ... }
//!
//! #[ktest(should_panic = "address 0x1000000000")]
//! fn faults_with_the_right_address() { ... }
//!
//! #[ktest(should_panic = "stopped", after_panic = unregister_what_it_left)]
//! fn panics_with_tracing_on() { ... }
//! ```
//!
//! `after_panic = PATH` names a `fn()` the runner calls once the test has
//! panicked, before the next test: a panicking test cannot clean up after
//! itself, and what it leaves (a registered tracer, say) must not depend on
//! which test happens to run next.
//!
//! The function is kept as written; next to it the macro emits a `#[test_case]`
//! static `kernel::testing::Test` describing it, which the custom test framework
//! (`custom_test_frameworks`) collects and hands to the kernel's runner.

use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::{parse_macro_input, ItemFn, LitStr};

#[proc_macro_attribute]
pub fn ktest(args: TokenStream, item: TokenStream) -> TokenStream {
    let function = parse_macro_input!(item as ItemFn);
    let mut should_panic = quote! { crate::testing::ShouldPanic::No };
    let mut after_panic = quote! { None };
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("should_panic") {
            should_panic = if meta.input.peek(syn::Token![=]) {
                let expected: LitStr = meta.value()?.parse()?;
                quote! { crate::testing::ShouldPanic::WithMessage(#expected) }
            } else {
                quote! { crate::testing::ShouldPanic::Yes }
            };
            Ok(())
        } else if meta.path.is_ident("after_panic") {
            let cleanup: syn::Path = meta.value()?.parse()?;
            after_panic = quote! { Some(#cleanup) };
            Ok(())
        } else {
            Err(meta.error("expected `should_panic`, `should_panic = \"message\"` or `after_panic = PATH`"))
        }
    });
    parse_macro_input!(args with parser);

    let name = &function.sig.ident;
    let descriptor = format_ident!("__KTEST_{}", name.to_string().to_uppercase());
    quote! {
        #function

        #[test_case]
        #[allow(non_upper_case_globals)]
        static #descriptor: crate::testing::Test = crate::testing::Test {
            name: concat!(module_path!(), "::", stringify!(#name)),
            function: #name,
            should_panic: #should_panic,
            after_panic: #after_panic,
        };
    }
    .into()
}
