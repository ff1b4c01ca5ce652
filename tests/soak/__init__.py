"""The soak suite: berth serve under sustained mixed load (RSS and p99 plateau)."""
