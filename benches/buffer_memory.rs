//! What one team flush's rows really hold, per `stowage bench` mix: the admitted estimate
//! (`EventRows::approx_bytes`) beside the heap the table buffers take (counted by a wrapping
//! allocator) and what they report (`BufferedTable::allocated_bytes`, which the budgets count),
//! then each table's Parquet encoding: the heap the encoder took beyond its input against what
//! it reported (`writer::encode_batches`). Last, the dedup window's heap at its default capacity
//! of a million ids. Figures in BENCHMARKS.md.
//! Run: `cargo bench --bench buffer_memory [-- EVENTS]` (default 35,000 events a mix, about
//! one flush of the shop mix under load).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

use foldhash::HashMap;
use stowage::allocator::placement::Placed;
use stowage::bench::generator::Generator;
use stowage::bench::mixes::Mix;
use stowage::config::ParquetConfig;
use stowage::ingest::buffered::BufferedTable;
use stowage::ingest::dedup::{Claim, Dedup};
use stowage::ingest::segment::{Shared, parse_message};
use stowage::ingest::top_fields::Top;
use stowage::model::TeamId;
use stowage::warehouse::unify::align_widened;
use stowage::warehouse::writer;

/// The server's allocator, counting the bytes live and their peak.
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let n = LIVE.fetch_add(l.size() as isize, Relaxed) + l.size() as isize;
        PEAK.fetch_max(n, Relaxed);
        // SAFETY: forwarded unchanged to the server's allocator.
        unsafe { Placed.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Relaxed);
        // SAFETY: `p` came from `alloc` above with this layout.
        unsafe { Placed.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// MiB with one decimal, or KiB below 1 MiB.
fn mib(n: impl TryInto<i64>) -> String {
    let n = n.try_into().unwrap_or(0) as f64;
    if n < 1_048_576.0 {
        format!("{:.1} KiB", n / 1024.0)
    } else {
        format!("{:.1}", n / 1_048_576.0)
    }
}

fn main() {
    let events: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(35_000);
    let now = chrono::Utc::now();
    println!(
        "{events} events a mix; MiB unless KiB\nmix      estimate  buffers(heap)  buffers(reported)  encoder peak(heap)  encoder peak(reported)"
    );
    for (name, mix) in [
        ("shop", Mix::Shop),
        ("wide", Mix::Wide),
        ("narrow", Mix::Narrow),
        ("sdk", Mix::Sdk),
        ("strings", Mix::Strings),
    ] {
        let mut g = Generator::new("mem", 1, now).with_mix(mix);
        let hole = "#".repeat(16);
        let msgs: Vec<String> = (0..events)
            .map(|i| g.message().to_string().replace(&hole, &format!("{i:016x}")))
            .collect();
        let base = LIVE.load(Relaxed);
        let mut tables: HashMap<String, BufferedTable> = HashMap::default();
        let mut estimate = 0u64;
        for request in msgs.chunks(500) {
            let rows: Vec<_> = request
                .iter()
                .map(|m| {
                    let top = Top::parse(m).expect("generated JSON");
                    parse_message(&top, None, Shared::default(), now, 1000, None)
                        .expect("generated messages are valid")
                        .1
                })
                .collect();
            for ev in &rows {
                estimate += ev.approx_bytes();
                for (table, cells) in ev.rows() {
                    let t = tables.entry(table.to_string()).or_default();
                    t.append(cells).expect("one type per column");
                }
            }
        }
        let heap = LIVE.load(Relaxed) - base;
        let reported: usize = tables.values().map(BufferedTable::allocated_bytes).sum();
        let cfg = ParquetConfig::default();
        let (mut heap_peak, mut reported_peak) = (0isize, 0usize);
        for batches in tables.values_mut().map(BufferedTable::take) {
            let before = LIVE.load(Relaxed);
            PEAK.store(before, Relaxed);
            let mut most = 0usize;
            let aligned = align_widened(&batches).expect("aligns");
            writer::encode_batches(&aligned, &cfg, &mut |b| most = most.max(b)).expect("encodes");
            heap_peak = heap_peak.max(PEAK.load(Relaxed) - before);
            reported_peak = reported_peak.max(most);
        }
        println!(
            "{name:<8} {:>8}  {:>13}  {:>17}  {:>18}  {:>22}",
            mib(estimate),
            mib(heap as i64),
            mib(reported as i64),
            mib(heap_peak as i64),
            mib(reported_peak as i64)
        );
    }
    dedup_window();
}

/// The dedup window after twice its default capacity of ids (so that it expires the oldest as it
/// goes), claimed and stored 500 a request: the heap it holds, and its peak (the table grows by
/// doubling, and both tables live while it does).
fn dedup_window() {
    let capacity = 1_000_000;
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let dedup = Dedup::new(std::time::Duration::from_secs(3600), capacity);
    let team = TeamId::from("mem");
    for request in 0..(2 * capacity / 500) {
        let ids: Vec<String> = (0..500).map(|i| format!("{request}-{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let claims = dedup.claim_many(&team, &ids, request as i64 * 1000);
        let tickets = claims
            .into_iter()
            .flatten()
            .filter_map(|c| match c {
                Claim::New(t) => Some(t),
                Claim::Seen(_) => None,
            })
            .collect();
        dedup.settle(tickets, true);
    }
    println!(
        "dedup window, {} ids: heap {} MiB, peak {} MiB",
        dedup.len(),
        mib(LIVE.load(Relaxed) - base),
        mib(PEAK.load(Relaxed) - base)
    );
}
