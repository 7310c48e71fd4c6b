// Shared helpers of the Verilator testbenches under hw/test: named checks
// that count passes and failures, and the closing line the runner sums.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace tb {

inline int passed = 0, failed = 0;
inline std::string scope; // the table case being run, named in failures

// check records one assertion; a failure prints what and where.
inline bool check(bool ok, const char *file, int line, const std::string &what) {
	if (ok) {
		passed++;
	} else {
		failed++;
		std::fprintf(stderr, "FAIL %s:%d [%s] %s\n", file, line, scope.c_str(), what.c_str());
	}
	return ok;
}

inline std::string hex(uint64_t v) {
	char b[32];
	std::snprintf(b, sizeof b, "%#llx", (unsigned long long)v);
	return b;
}

inline std::string hexs(const std::vector<uint8_t> &b) {
	std::string s;
	char x[4];
	for (auto c : b) std::snprintf(x, sizeof x, "%02x", c), s += x;
	return s;
}

// finish prints "NAME: N passed, M failed" and returns the exit status.
inline int finish(const char *name) {
	std::printf("%s: %d passed, %d failed\n", name, passed, failed);
	return failed ? 1 : 0;
}

// bytes parses hex digits, ignoring spaces and newlines.
inline std::vector<uint8_t> bytes(const std::string &s) {
	std::vector<uint8_t> out;
	int hi = -1;
	for (char c : s) {
		int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
		if (v < 0) continue;
		if (hi < 0) { hi = v; } else { out.push_back(uint8_t(hi << 4 | v)); hi = -1; }
	}
	return out;
}

} // namespace tb

// CHECK_EQ compares two integers and names both in a failure.
#define CHECK(cond) tb::check((cond), __FILE__, __LINE__, #cond)
#define CHECK_EQ(got, want)                                                                          \
	tb::check((uint64_t)(got) == (uint64_t)(want), __FILE__, __LINE__,                                \
	          std::string(#got " = ") + tb::hex((uint64_t)(got)) + ", want " + tb::hex((uint64_t)(want)))

// CHECK_BYTES compares two byte strings and shows both in a failure.
#define CHECK_BYTES(got, want) \
	tb::check((got) == (want), __FILE__, __LINE__, std::string(#got " = ") + tb::hexs(got) + ", want " + tb::hexs(want))
