//! The engine as the sync loop's source of desired records.

use tokio::sync::watch;

use crate::dns::Endpoint;
use crate::engine::Outcome;
use crate::index::Index;
use crate::model::RecordType;

/// Desired records: the engine's settled records over the index's current snapshot, conflicts settled
/// per `--conflict-resolution`.
pub struct EngineDesired {
    index: Index,
    /// The index's change counter: it moves with every write, and with nothing else.
    changes: watch::Receiver<u64>,
}

impl EngineDesired {
    pub fn new(index: Index) -> EngineDesired {
        let changes = index.subscribe();
        EngineDesired { index, changes }
    }
}

impl super::DesiredSource for EngineDesired {
    fn desired(&self) -> Vec<Endpoint> {
        // Shared with the findings report: one evaluation per snapshot.
        endpoints(&self.index.settled())
    }

    fn generation(&self) -> Option<u64> {
        Some(*self.changes.borrow())
    }
}

/// The settled records as provider endpoints, each owned by its first route (sorted), in
/// external-dns's `kind/namespace/name` resource form.
pub fn endpoints(outcome: &Outcome) -> Vec<Endpoint> {
    outcome
        .records
        .iter()
        .map(|record| {
            let targets: Vec<&str> = match record.record_type {
                // A CNAME has exactly one target: the first (sorted) keeps it deterministic.
                RecordType::CNAME => record.targets.iter().take(1).map(String::as_str).collect(),
                _ => record.targets.iter().map(String::as_str).collect(),
            };
            let mut endpoint = Endpoint::new(&record.dns_name, record.record_type, targets);
            endpoint.ttl = record.ttl;
            endpoint.resource = record.routes.first().map(|r| r.to_ascii_lowercase());
            endpoint
        })
        .collect()
}

/// The smallest set of parent domains (name minus its first label) covering every record:
/// the zones the embedded server serves when none are given.
pub fn inferred_zones(outcome: &Outcome) -> Vec<String> {
    let mut parents: Vec<String> = outcome
        .records
        .iter()
        .filter_map(|r| {
            r.dns_name
                .trim_start_matches("*.")
                .split_once('.')
                .map(|(_, p)| p.to_owned())
        })
        .filter(|p| p.contains('.'))
        .collect();
    parents.sort_by_key(|p| p.len());
    let mut zones: Vec<String> = Vec::new();
    for parent in parents {
        if !zones
            .iter()
            .any(|z| parent == *z || parent.ends_with(&format!(".{z}")))
        {
            zones.push(parent);
        }
    }
    zones.sort();
    zones
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::DesiredSource;

    #[test]
    fn the_generation_moves_with_every_write_to_the_index() {
        let index = Index::new();
        let desired = EngineDesired::new(index.clone());
        let before = desired.generation();
        let namespace = crate::model::decode_value(&serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}
        }))
        .unwrap()
        .unwrap();
        index.apply(namespace);
        let after = desired.generation();
        assert!(before.is_some() && after.is_some() && before != after);
        assert_eq!(desired.generation(), after, "reading does not move it");
    }
}
