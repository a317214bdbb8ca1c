//! Placeholder: the benchtool is being written.

fn main() {
    #[cfg(feature = "rocksdb")]
    {
        let _ = rocksdb::Options::default();
    }
}
