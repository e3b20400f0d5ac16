//! Sources feed the index with apply / delete / reset events: `files` (YAML on disk) and, for a
//! cluster, `kube` (watchers).

pub mod files;
pub mod kube;
pub mod locations;
