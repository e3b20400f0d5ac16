//! Which Gateway API kinds the cluster serves, at which version, and whether the API server
//! says it is ready.

use std::collections::{BTreeMap, HashSet};

use kube::api::ApiResource;
use tracing::debug;

use crate::model::{GATEWAY_GROUP, ObjectKind};

/// Which version of each kind the cluster serves (absent: not served).
pub(super) type Served = BTreeMap<ObjectKind, &'static str>;

pub(super) async fn discover(client: &kube::Client) -> Result<Served, kube::Error> {
    // Namespaces are core: always served.
    let mut served = BTreeMap::from([(ObjectKind::Namespace, "v1")]);
    let groups = client.list_api_groups().await?;
    let Some(group) = groups.groups.iter().find(|g| g.name == GATEWAY_GROUP) else {
        return Ok(served);
    };
    let group_versions: HashSet<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
    let mut plurals_by_version: BTreeMap<&'static str, HashSet<String>> = BTreeMap::new();
    for kind in ObjectKind::ALL
        .into_iter()
        .filter(|k| k.group() == GATEWAY_GROUP)
    {
        for version in kind.versions() {
            if !group_versions.contains(version) || plurals_by_version.contains_key(version) {
                continue;
            }
            let plurals = match client
                .list_api_group_resources(&format!("{GATEWAY_GROUP}/{version}"))
                .await
            {
                Ok(list) => list.resources.into_iter().map(|r| r.name).collect(),
                // Removed between the two requests: nothing served there.
                Err(kube::Error::Api(status)) if status.code == 404 => HashSet::new(),
                Err(other) => return Err(other),
            };
            plurals_by_version.insert(version, plurals);
        }
    }
    for kind in ObjectKind::ALL
        .into_iter()
        .filter(|k| k.group() == GATEWAY_GROUP)
    {
        let newest = kind.versions().iter().find(|v| {
            plurals_by_version
                .get(*v)
                .is_some_and(|p| p.contains(kind.plural()))
        });
        if let Some(version) = newest {
            served.insert(kind, version);
        }
    }
    Ok(served)
}

/// Whether the API server answers `/readyz` with 200 (any authenticated client may read it).
pub(super) async fn api_ready(client: &kube::Client) -> bool {
    let Ok(request) = hyper::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    match client.request_text(request).await {
        Ok(_) => true,
        Err(error) => {
            debug!(%error, "the API server is not ready");
            false
        }
    }
}

pub(super) fn api_resource(kind: ObjectKind, version: &str) -> ApiResource {
    let group = kind.group();
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.kind().to_string(),
        plural: kind.plural().to_string(),
    }
}
