//! Facts about the machine, the build and the source tree, for the report.
//!
//! Everything here is read-only: `/proc` files, `uname`-like kernel files, and `git rev-parse`
//! and `git diff-index` (plumbing commands that never write to the repository).

use std::path::Path;
use std::process::Command;

use crate::metrics::parse_kib_or_plain_field;

/// The machine a suite ran on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MachineInfo {
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub logical_cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// Total memory.
    pub memory_total_bytes: u64,
    /// File system type and mount point holding the database directories.
    pub filesystem: String,
}

impl MachineInfo {
    /// Collects the facts; `db_path` is where databases are created.
    pub fn collect(db_path: &Path) -> MachineInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                (name.trim() == "model name").then(|| value.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".to_string());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        MachineInfo {
            cpu_model,
            logical_cpus: std::thread::available_parallelism().map(|count| count.get()).unwrap_or(0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|text| text.trim().to_string())
                .unwrap_or_else(|_| "unknown".to_string()),
            memory_total_bytes: parse_kib_or_plain_field(&meminfo, "MemTotal:", 1024).unwrap_or(0),
            filesystem: filesystem_of(db_path),
        }
    }
}

/// "ext4 on /" for the mount holding `path` (the longest mount point that prefixes it).
pub fn filesystem_of(path: &Path) -> String {
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut best: Option<(usize, String, String)> = None;
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 3 {
            continue;
        }
        let mount_point = fields[1].replace("\\040", " ");
        if resolved.starts_with(&mount_point) && best.as_ref().is_none_or(|(length, _, _)| mount_point.len() > *length)
        {
            best = Some((mount_point.len(), fields[2].to_string(), mount_point));
        }
    }
    match best {
        Some((_, kind, mount_point)) => format!("{kind} on {mount_point}"),
        None => "unknown".to_string(),
    }
}

/// How this binary was compiled.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildInfo {
    /// True for an optimized build.
    pub release: bool,
    /// CPU features enabled at compile time beyond the baseline (from `-C target-cpu=...`).
    pub target_features: Vec<&'static str>,
    /// True when RocksDB is compiled in.
    pub rocksdb: bool,
}

impl BuildInfo {
    /// The facts of this binary.
    pub fn current() -> BuildInfo {
        let candidates = [
            ("sse4.2", cfg!(target_feature = "sse4.2")),
            ("pclmulqdq", cfg!(target_feature = "pclmulqdq")),
            ("avx", cfg!(target_feature = "avx")),
            ("avx2", cfg!(target_feature = "avx2")),
            ("bmi2", cfg!(target_feature = "bmi2")),
            ("avx512f", cfg!(target_feature = "avx512f")),
            ("crc (aarch64)", cfg!(target_feature = "crc")),
        ];
        BuildInfo {
            release: !cfg!(debug_assertions),
            target_features: candidates.iter().filter(|(_, on)| *on).map(|(name, _)| *name).collect(),
            rocksdb: cfg!(feature = "rocksdb"),
        }
    }

    /// True when CPU-specific code generation was on.
    pub fn cpu_specific(&self) -> bool {
        !self.target_features.is_empty()
    }

    /// A sentence for the report.
    pub fn describe(&self) -> String {
        let profile = if self.release { "release (optimized)" } else { "DEBUG (unoptimized: numbers are meaningless)" };
        let flags = if self.cpu_specific() {
            format!(
                "CPU-specific flags: yes (Rust compiled with {}, as `-C target-cpu=native` gives on this machine; \
                 librocksdb-sys passes the same target CPU to the C++ build as `-march=...` plus the matching \
                 `-msse4.2 -mpclmul -mavx2 ...`, so both engines use hardware CRC32C and the same instruction set)",
                self.target_features.join(", ")
            )
        } else {
            "CPU-specific flags: no (baseline target for both Rust and, through librocksdb-sys, the C++ build)"
                .to_string()
        };
        let rocksdb = if self.rocksdb { "RocksDB compiled in" } else { "RocksDB not compiled in" };
        format!("{profile}; {flags}; {rocksdb}.")
    }
}

/// The current commit (short hash, with `-dirty` when the work tree differs), or "unknown".
pub fn commit_description(repository: &Path) -> String {
    let hash = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(repository)
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string());
    let Some(hash) = hash else {
        return "unknown".to_string();
    };
    let dirty = Command::new("git")
        .args(["diff-index", "--quiet", "HEAD", "--"])
        .current_dir(repository)
        .status()
        .map(|status| !status.success())
        .unwrap_or(false);
    if dirty {
        format!("{hash}-dirty")
    } else {
        hash
    }
}

/// The one-minute load average, if readable.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// The Rust compiler version on the path, if any (the one that built the tool, usually).
pub fn rustc_version() -> Option<String> {
    let output = Command::new("rustc").arg("--version").output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_facts_are_found() {
        let machine = MachineInfo::collect(&std::env::temp_dir());
        assert!(machine.logical_cpus >= 1);
        assert!(machine.memory_total_bytes > 0);
        assert_ne!(machine.filesystem, "unknown");
        assert!(!machine.kernel.is_empty());
    }

    #[test]
    fn build_description_names_the_profile() {
        let build = BuildInfo::current();
        assert!(build.describe().contains("CPU-specific flags"));
    }
}
