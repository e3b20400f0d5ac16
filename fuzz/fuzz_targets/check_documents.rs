//! YAML or JSON documents → `gateway-dns check`: the files loader, the engine's settlement and
//! the three report formats, alone and laid over the admission fixtures' cluster (as
//! `check --kubeconfig` does). The steps and checks are `inputs::check_documents`.
#![no_main]

use std::sync::OnceLock;

use gateway_dns::model::Object;
use gateway_dns::source::files::parse_text;
use libfuzzer_sys::fuzz_target;

#[path = "../inputs.rs"]
mod inputs;

const CLUSTER: &str = include_str!("../../tests/fixtures/admission/cluster.yaml");

fn live() -> &'static [Object] {
    static LIVE: OnceLock<Vec<Object>> = OnceLock::new();
    LIVE.get_or_init(|| {
        let mut loaded = Vec::new();
        parse_text("cluster.yaml", CLUSTER, false, &mut loaded).expect("the fixture cluster reads");
        loaded.into_iter().map(|l| l.object).collect()
    })
}

fuzz_target!(|data: &[u8]| {
    if let Err(failed) = inputs::check_documents(data, live()) {
        panic!("{failed}");
    }
});
