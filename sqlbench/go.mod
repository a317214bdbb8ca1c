module riptide/sqlbench

go 1.24.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/go-sql-driver/mysql v1.10.1
)

require filippo.io/edwards25519 v1.2.0 // indirect
