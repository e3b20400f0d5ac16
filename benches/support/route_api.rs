//! HTTPRoutes through a real API server, for the benches that start one.

use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::Value;

pub fn routes_resource() -> ApiResource {
    ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: "HTTPRoute".into(),
        plural: "httproutes".into(),
    }
}

/// Creates the routes `route(0)` .. `route(count - 1)` through the API, 16 requests in flight.
pub async fn create_routes(client: &kube::Client, count: usize, route: fn(usize) -> Value) {
    futures::stream::iter(0..count)
        .map(|i| {
            let client = client.clone();
            async move {
                let route = route(i);
                let namespace = route["metadata"]["namespace"].as_str().unwrap().to_string();
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client, &namespace, &routes_resource());
                let object: DynamicObject = serde_json::from_value(route).unwrap();
                api.create(&PostParams::default(), &object)
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
}
