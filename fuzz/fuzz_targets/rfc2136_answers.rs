//! RFC 2136 / AXFR answers → the rfc2136 client's reading of them: the SOA answer a listing
//! starts with (also the shape of an UPDATE's answer), then a zone transfer's messages. The
//! input's layout, the steps and the checks are `inputs::rfc2136_answers`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../inputs.rs"]
mod inputs;

fuzz_target!(|data: &[u8]| {
    if let Err(failed) = inputs::rfc2136_answers(data) {
        panic!("{failed}");
    }
});
