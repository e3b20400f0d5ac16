//! PowerDNS API JSON → the pdns client's decoding: a zone listing into RRsets, and an error
//! answer into its message.
#![no_main]

use gateway_dns::dns::provider::pdns::{api_error_message, zone_endpoints};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Ok(endpoints) = zone_endpoints(body) {
        for endpoint in &endpoints {
            assert!(
                !endpoint.targets.is_empty(),
                "an RRset without records: {endpoint}"
            );
        }
    }
    let _ = api_error_message(body);
});
