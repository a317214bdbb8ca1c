// C++ smoke test: the header compiles as C++ (extern "C", no C-only constructs) and a few calls
// work from C++ code, with RAII owning the handles.
#include "riptide.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

struct DbCloser {
    void operator()(riptide_db_t *db) const { riptide_close(db, nullptr); }
};

int failures = 0;

void check(bool condition, const char *what) {
    if (!condition) {
        ++failures;
        std::fprintf(stderr, "  FAILED: %s\n", what);
    }
}

}  // namespace

int main() {
    check(riptide_version() == RIPTIDE_ABI_VERSION, "version");
    char pattern[] = "/tmp/riptide-cc-smoke-XXXXXX";
    const char *dir = mkdtemp(pattern);
    check(dir != nullptr, "mkdtemp");
    std::string path = std::string(dir ? dir : "/tmp") + "/db";
    riptide_db_t *raw = nullptr;
    riptide_error_t *err = nullptr;
    check(riptide_open(path.c_str(), nullptr, &raw, &err) == RIPTIDE_OK, "open");
    std::unique_ptr<riptide_db_t, DbCloser> db(raw);
    const std::string key = "c++", value = "works";
    check(riptide_put(db.get(), nullptr, reinterpret_cast<const uint8_t *>(key.data()), key.size(),
                      reinterpret_cast<const uint8_t *>(value.data()), value.size(), &err) == RIPTIDE_OK,
          "put");
    riptide_pinnable_t *pin = nullptr;
    check(riptide_get_pinned(db.get(), nullptr, reinterpret_cast<const uint8_t *>(key.data()), key.size(), &pin,
                             &err) == RIPTIDE_OK,
          "get_pinned");
    size_t len = 0;
    const uint8_t *data = riptide_pinnable_value(pin, &len);
    check(data != nullptr && std::string(reinterpret_cast<const char *>(data), len) == value, "value");
    check(riptide_pinnable_release(pin) == RIPTIDE_OK, "release");
    riptide_stats_t stats{};
    stats.struct_size = sizeof stats;
    check(riptide_get_stats(db.get(), &stats, &err) == RIPTIDE_OK && stats.user_bytes_written > 0, "stats");
    check(riptide_close(db.release(), &err) == RIPTIDE_OK, "close");
    check(riptide_close(raw, &err) == RIPTIDE_MISUSE, "double close");
    check(std::strstr(riptide_error_message(err), "riptide_db_t") != nullptr, "message");
    riptide_error_free(err);
    std::string remove = "rm -rf '" + std::string(dir ? dir : "/nonexistent") + "'";
    check(std::system(remove.c_str()) == 0, "cleanup");
    std::printf("test c_abi::cxx_smoke ... %s\n\n", failures ? "FAILED" : "ok");
    std::printf("test result: %s. %d passed; %d failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n",
                failures ? "FAILED" : "ok", failures ? 0 : 1, failures ? 1 : 0);
    return failures ? 1 : 0;
}
