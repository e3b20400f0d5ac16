//! The `process_*` metrics every Prometheus exporter has (the names and meanings of the Go
//! client's process collector), read from `/proc` at each scrape. Where `/proc` is missing or a
//! file cannot be read, the metric it gives is left out rather than reported wrong.

use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// Clock ticks per second of the times in `/proc/self/stat`: `USER_HZ`, which the kernel fixes
/// at 100 in what it shows user space (the Prometheus Go client's procfs assumes the same).
const USER_HZ: f64 = 100.0;

/// Reads `/proc/self` on each scrape.
#[derive(Debug)]
pub(super) struct ProcessCollector {
    /// When the registry was made: the start time if `/proc` cannot tell it.
    created: f64,
}

impl ProcessCollector {
    pub(super) fn new() -> ProcessCollector {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        ProcessCollector { created }
    }
}

/// The fields of `/proc/self/stat` used here.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    /// User plus system CPU time, in clock ticks.
    cpu_ticks: u64,
    /// Start time after boot, in clock ticks.
    start_ticks: u64,
    /// Virtual memory size in bytes.
    virtual_bytes: u64,
}

/// Parses `/proc/self/stat`. The command name (field 2) may hold spaces and parentheses, so the
/// fields are counted after its last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, after_name) = text.rsplit_once(')')?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // fields[0] is field 3 (state): field n is fields[n - 3].
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        cpu_ticks: field(14)?.checked_add(field(15)?)?,
        start_ticks: field(22)?,
        virtual_bytes: field(23)?,
    })
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn parse_resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib * 1024)
}

/// The boot time (`btime`, Unix seconds) of `/proc/stat`.
fn parse_boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The soft limit of "Max open files" in `/proc/self/limits` (None when unlimited).
fn parse_max_fds(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    let metric_encoder = encoder.encode_descriptor(name, help, unit, metric.metric_type())?;
    metric.encode(metric_encoder)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stat = read("/proc/self/stat").as_deref().and_then(parse_stat);
        if let Some(stat) = stat {
            let cpu = ConstCounter::new(stat.cpu_ticks as f64 / USER_HZ);
            let metric_encoder = encoder.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent.",
                Some(&Unit::Seconds),
                cpu.metric_type(),
            )?;
            cpu.encode(metric_encoder)?;
            gauge(
                &mut encoder,
                "process_virtual_memory",
                "Virtual memory size.",
                Some(&Unit::Bytes),
                stat.virtual_bytes as f64,
            )?;
        }
        if let Some(resident) = read("/proc/self/status")
            .as_deref()
            .and_then(parse_resident_bytes)
        {
            gauge(
                &mut encoder,
                "process_resident_memory",
                "Resident memory size.",
                Some(&Unit::Bytes),
                resident as f64,
            )?;
        }
        if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
            // The directory handle read here is one of the open descriptors: not counted.
            let open = entries.count().saturating_sub(1);
            gauge(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors.",
                None,
                open as f64,
            )?;
        }
        if let Some(max) = read("/proc/self/limits").as_deref().and_then(parse_max_fds) {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                None,
                max as f64,
            )?;
        }
        let boot = read("/proc/stat").as_deref().and_then(parse_boot_time);
        let start = match (boot, stat) {
            (Some(boot), Some(stat)) => boot as f64 + stat.start_ticks as f64 / USER_HZ,
            _ => self.created,
        };
        gauge(
            &mut encoder,
            "process_start_time",
            "Start time of the process since unix epoch.",
            Some(&Unit::Seconds),
            start,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let text = "4242 (a (odd) name) S 1 4242 4242 0 -1 4194560 3000 0 0 0 250 130 0 0 20 0 9 0 \
                    123456 987654321 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                cpu_ticks: 380,
                start_ticks: 123456,
                virtual_bytes: 987654321,
            })
        );
        assert_eq!(parse_stat("4242 (truncated) S 1 2"), None);
    }

    #[test]
    fn status_limits_and_boot_time_are_read() {
        let status = "Name:\tgateway-dns\nVmSize:\t  100 kB\nVmRSS:\t   5120 kB\nThreads:\t9\n";
        assert_eq!(parse_resident_bytes(status), Some(5120 * 1024));
        assert_eq!(parse_resident_bytes("VmRSS: 12 pages\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max processes             63711                63711                processes\n\
                      Max open files            1048576              1048576              files\n";
        assert_eq!(parse_max_fds(limits), Some(1_048_576));
        assert_eq!(
            parse_max_fds(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1764800000\nprocesses 9\n"),
            Some(1_764_800_000)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reports_its_own_figures() {
        let metrics = crate::metrics::Metrics::new();
        let text = metrics.render();
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} missing from\n{text}"))
        };
        assert!(value("process_resident_memory_bytes") > 1024.0 * 1024.0);
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_cpu_seconds_total") >= 0.0);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let start = value("process_start_time_seconds");
        assert!(
            start <= now + 1.0 && start > now - 86400.0 * 365.0,
            "{start}"
        );
        assert!(text.contains("# TYPE process_cpu_seconds_total counter\n"));
    }
}
