//! The index's name maps, and maps whose lookups read no key text, side by side: the claims map
//! as the index keeps it (imbl's B-tree `OrdMap<Name, _>`: each comparison on the way down reads
//! another name's text, on the heap), and imbl's hash map (`HashMap<Name, _>`, the same
//! persistent sharing: a lookup hashes the name asked for and compares stored hash bits, reading
//! only the text of the name it finds) with std's SipHash and with foldhash. The names are the
//! ones `admission_load`'s index holds (two per route, 20k routes), each looked up as the webhook
//! does, by `&str`.
//!
//! Per map, the median of 7 alternating rounds: ns per lookup of the same name again and again
//! (hot caches, as in the in-process figures of `admission_load`) and of every name in a random
//! order (each lookup on other nodes), the ratio to the B-tree, and the heap per name.
//!
//! Run: `cargo bench --bench index_maps [-- ROUTES]`.

#[path = "support/counting.rs"]
mod counting;

use std::hash::BuildHasher;
use std::hint::black_box;
use std::time::Instant;

use gateway_dns::model::Name;

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

const ROUNDS: usize = 7;
const GATEWAYS: usize = 200;

/// A name map under trial: built from the names, then asked for each.
trait Map {
    fn label(&self) -> &'static str;
    fn get(&self, name: &str) -> Option<u32>;
}

struct BTree(imbl::OrdMap<Name, u32>);

impl Map for BTree {
    fn label(&self) -> &'static str {
        "imbl OrdMap (the index's)"
    }
    fn get(&self, name: &str) -> Option<u32> {
        self.0.get(name).copied()
    }
}

struct Hamt<S: BuildHasher + Clone>(
    imbl::GenericHashMap<Name, u32, S, imbl::shared_ptr::DefaultSharedPtr>,
    &'static str,
);

impl<S: BuildHasher + Clone> Map for Hamt<S> {
    fn label(&self) -> &'static str {
        self.1
    }
    fn get(&self, name: &str) -> Option<u32> {
        self.0.get(name).copied()
    }
}

/// The hostnames of `synthetic::route_value`'s routes: `app{i}` and `www{i}` under the zone of
/// the route's Gateway.
fn names(routes: usize) -> Vec<String> {
    (0..routes)
        .flat_map(|i| {
            let domain = format!("zone{}.example.com", i % GATEWAYS);
            [format!("app{i}.{domain}"), format!("www{i}.{domain}")]
        })
        .collect()
}

/// Heap bytes a map built by `build` holds, and the map.
fn built<M>(build: impl FnOnce() -> M) -> (M, isize) {
    let before = counting::live();
    let map = build();
    (map, counting::live() - before)
}

/// ns per lookup of each of `queries`, `passes` times over.
fn time(map: &dyn Map, queries: &[&str], passes: usize) -> f64 {
    let started = Instant::now();
    let mut found = 0u64;
    for _ in 0..passes {
        for query in queries {
            found += u64::from(black_box(map.get(black_box(query))).is_some());
        }
    }
    let spent = started.elapsed();
    assert_eq!(
        found,
        (queries.len() * passes) as u64,
        "every name is there"
    );
    spent.as_nanos() as f64 / (queries.len() * passes) as f64
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let routes: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000);
    let names = names(routes);
    let keys = || names.iter().map(|n| (Name::new(n), 0u32));
    let (ord, ord_heap) = built(|| BTree(keys().collect()));
    let (sip, sip_heap) = built(|| {
        Hamt(
            keys().collect::<imbl::GenericHashMap<_, _, std::hash::RandomState, _>>(),
            "imbl HashMap, SipHash",
        )
    });
    let (fold, fold_heap) = built(|| {
        Hamt(
            keys().collect::<imbl::GenericHashMap<_, _, foldhash::fast::RandomState, _>>(),
            "imbl HashMap, foldhash",
        )
    });
    let maps: [(&dyn Map, isize); 3] = [(&ord, ord_heap), (&sip, sip_heap), (&fold, fold_heap)];
    // The names' own text is the same in each: the heap per name beyond it.
    let (_, text_heap) = built(|| names.iter().map(|n| Name::new(n)).collect::<Vec<_>>());
    let text_heap = text_heap - (names.len() * size_of::<Name>()) as isize;

    let mut shuffled: Vec<&str> = names.iter().map(String::as_str).collect();
    fastrand::shuffle(&mut shuffled);
    let one = [shuffled[0]];
    let mut hot = vec![Vec::new(); maps.len()];
    let mut spread = vec![Vec::new(); maps.len()];
    for _ in 0..ROUNDS {
        for (i, (map, _)) in maps.iter().enumerate() {
            hot[i].push(time(*map, &one, 2_000_000));
            spread[i].push(time(*map, &shuffled, 20));
        }
    }
    println!(
        "{} names ({routes} routes, two hostnames each, as admission_load's index), looked up by \
         &str; medians of {ROUNDS} alternating rounds",
        names.len()
    );
    println!(
        "{:<28} {:>14} {:>8} {:>18} {:>8} {:>14}",
        "map", "same name (ns)", "ratio", "every name (ns)", "ratio", "heap B/name"
    );
    let (hot_base, spread_base) = (median(hot[0].clone()), median(spread[0].clone()));
    for (i, (map, heap)) in maps.iter().enumerate() {
        let (h, s) = (median(hot[i].clone()), median(spread[i].clone()));
        println!(
            "{:<28} {h:>14.1} {:>8.2} {s:>18.1} {:>8.2} {:>14.1}",
            map.label(),
            h / hot_base,
            s / spread_base,
            (heap - text_heap) as f64 / names.len() as f64
        );
    }
}
