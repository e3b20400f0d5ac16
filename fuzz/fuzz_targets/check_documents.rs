//! YAML or JSON documents → `gateway-dns check`: the files loader, the engine's settlement and
//! the three report formats, alone and laid over the admission fixtures' cluster (as
//! `check --kubeconfig` does).
#![no_main]

use std::sync::{Arc, OnceLock};

use gateway_dns::cmd::check::{check, to_github, to_json, to_text};
use gateway_dns::engine::Config;
use gateway_dns::model::Object;
use gateway_dns::source::files::{Report, parse_text, parse_text_into};
use libfuzzer_sys::fuzz_target;

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
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The check command reads `.json` files as JSON and everything else as YAML; the first
    // character stands in for the file name here.
    let is_json = text.trim_start().starts_with(['{', '[']);
    let mut report = Report::default();
    if parse_text_into("input", text, is_json, &mut report).is_err() {
        return;
    }
    let cfg = Arc::new(Config::default());
    for overlay in [None, Some(live().to_vec())] {
        let checked = check(
            cfg.clone(),
            report.objects.clone(),
            report.skipped.clone(),
            overlay,
        );
        let json = to_json(&checked);
        // The stable JSON interface must stay JSON whatever the input held.
        if let Err(error) = serde_json::from_str::<serde_json::Value>(&json) {
            panic!("check's JSON report does not parse: {error}\n{json}");
        }
        let _ = to_text(&checked, false);
        let _ = to_github(&checked);
    }
});
