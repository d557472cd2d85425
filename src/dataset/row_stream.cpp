#include "dataset/row_stream.hpp"

#include <algorithm>
#include <climits>
#include <exception>
#include <memory>

#include "base/crc32c.hpp"
#include "base/error.hpp"
#include "base/worker_pool.hpp"
#include "dataset/fsutil.hpp"
#include "dataset/row.hpp"
#include "run/codec.hpp"

namespace a2pack::dataset {

namespace {

// Runs decoded per round: the memory a build holds is about this many run
// payloads plus their rows, whatever the dataset's size.
constexpr size_t kChunkRuns = 256;

int64_t to_sql_int(uint64_t v, const char* what, const std::string& label) {
  if (v > static_cast<uint64_t>(INT64_MAX))
    fail(A2PACK_E_UNSUPPORTED, "{}: {} {} does not fit SQLite's 64-bit INTEGER", label, what, v);
  return static_cast<int64_t>(v);
}

template <typename F>
void catch_into(std::exception_ptr& slot, F&& fn) {
  try {
    fn();
  } catch (...) {
    slot = std::current_exception();
  }
}


// The metadata.db row of a decoded run but for where it goes (id,
// first_step_idx), as the digest hashes it: the values insert_runs stores.
RunRow meta_row(const run::Meta& m, uint64_t n_steps) {
  RunRow r;
  r.num_steps = static_cast<int64_t>(n_steps);
  r.max_score = static_cast<int64_t>(m.max_score);
  r.highest_tile = m.highest_tile;
  r.engine = m.engine;
  r.start_time = static_cast<int64_t>(m.start_unix_s);
  r.elapsed_s = m.elapsed_s;
  return r;
}

// With skip_bad: turn the failures of a round into skips (told to
// on_bad_input, in input order, from this thread); otherwise rethrow the first.
size_t take_failures(std::vector<std::exception_ptr>& errors, size_t k, size_t a,
                     std::vector<char>& skip, const RunSource& src, const BuildOptions& o,
                     StreamResult& res) {
  size_t found = 0;
  for (size_t j = 0; j < k; ++j) {
    if (!errors[j]) continue;
    if (!o.skip_bad) std::rethrow_exception(errors[j]);
    a2pack_status st = A2PACK_E_INTERNAL;
    std::string msg;
    try {
      std::rethrow_exception(errors[j]);
    } catch (const Error& e) {
      st = e.status();
      msg = e.what();
    } catch (const std::exception& e) {
      msg = e.what();
    }
    errors[j] = nullptr;
    skip[j] = 1;
    ++found;
    ++res.skipped;
    if (o.on_bad_input) o.on_bad_input(src.label(a + j), st, msg);
  }
  return found;
}

}  // namespace

// Decode every run of `src` and hand its rows to `out`, run ids from
// `first_id`, row numbers from `first_row`, extending `crc`.
//
// Each run's content digest is computed with its rows (dataset/digest.hpp)
// and checked with `dup`; once a duplicate is to be refused nothing more is
// handed to `out`, the rest is decoded to count them all, and the refusal is
// thrown at the end (the callers' error paths take back what was written).
StreamResult stream_rows(const RunSource& src, const RowSink& out, uint64_t first_id,
                         uint64_t first_row, uint32_t crc, const BuildOptions& o,
                         const char* crash_name, DupContext& dup) {
  const size_t n = src.count();
  if (first_id > (uint64_t{1} << 32) || n > (uint64_t{1} << 32) - first_id)
    fail(A2PACK_E_UNSUPPORTED, "{}: {} runs after run id {} exceed the u32 run_id of a row",
         src.input(), n, first_id);
  StreamResult res;
  res.crc = crc;
  res.runs.reserve(n);
  const unsigned workers = resolve_workers(o.workers);

  std::vector<std::vector<uint8_t>> scratch(kChunkRuns);
  std::vector<PayloadView> views(kChunkRuns);
  std::vector<run::Header> headers(kChunkRuns);
  std::vector<uint64_t> offs(kChunkRuns + 1);
  std::vector<uint8_t> rows;
  struct Cols {
    std::vector<uint64_t> boards;
    std::vector<uint8_t> moves;
    std::vector<float> values;
    std::vector<uint8_t> legal, present;
  };
  std::vector<Cols> cols(workers);
  std::vector<std::unique_ptr<RunHasher>> hashers(workers);
  std::vector<RunDigest> digests(kChunkRuns);
  // Failures are kept per run and the first in input order is reported, so
  // the error does not depend on thread timing.
  std::vector<std::exception_ptr> errors(kChunkRuns);
  uint64_t row = first_row;

  uint64_t next_id = first_id;
  std::vector<char> skip(kChunkRuns);
  std::vector<uint64_t> ids(kChunkRuns);
  for (size_t a = 0; a < n; a += kChunkRuns) {
    const size_t k = std::min(kChunkRuns, n - a);
    std::fill(skip.begin(), skip.end(), 0);
    // Read and parse headers in parallel (v1 CRCs are checked here).
    parallel_for(k, workers, [&](size_t j) {
      catch_into(errors[j], [&] {
        const size_t i = a + j;
        try {
          views[j] = src.payload(i, scratch[j]);
          headers[j] = run::parse_header(views[j].data, views[j].len);
        } catch (const Error& e) {
          rethrow_with_context(e, src.label(i));
        }
        if (headers[j].n_steps > kMaxRunSteps)
          fail(A2PACK_E_UNSUPPORTED,
               "{}: {} steps; a dataset row's step_index is a u16, so a run may have at most {} "
               "steps",
               src.label(i), headers[j].n_steps, kMaxRunSteps);
      });
    });
    take_failures(errors, k, a, skip, src, o, res);
    // Decode each kept run into per-worker columns, then into its rows. A run
    // skipped at this stage changes the ids and rows of those after it, so
    // the round is laid out again without it.
    for (;;) {
      offs[0] = 0;
      uint64_t id = next_id;
      for (size_t j = 0; j < k; ++j) {
        ids[j] = id;
        if (!skip[j]) ++id;
        offs[j + 1] = offs[j] + (skip[j] ? 0 : headers[j].n_steps);
      }
      rows.resize(offs[k] * kRowBytes);
      parallel_for_worker(k, workers, [&](unsigned w, size_t j) { catch_into(errors[j], [&] {
        if (skip[j]) return;
        const size_t i = a + j;
        const run::Header& h = headers[j];
        const size_t ns = h.n_steps;
        Cols& c = cols[w];
        if (c.boards.size() < ns || c.boards.empty()) {
          size_t cap = std::max<size_t>(ns, 1);
          c.boards.resize(cap);
          c.moves.resize(cap);
          c.values.resize(4 * cap);
          c.legal.resize(cap);
          c.present.resize(cap);
        }
        run::StepColumns sc{c.boards.data(), c.moves.data(), c.values.data(), c.legal.data(),
                            c.present.data()};
        try {
          run::decode_steps(views[j].data, views[j].len, h, sc);
        } catch (const Error& e) {
          rethrow_with_context(e, src.label(i));
        }
        if (!o.allow_missing_branches)
          for (size_t s = 0; s < ns; ++s)
            if (!c.present[s])
              fail(A2PACK_E_INVALID_ARGUMENT,
                   "{}: step {} has no branch values (the run was recorded without them), so its "
                   "ev_legal/ev_values are unknown; pass --allow-missing-branches to mark only "
                   "the chosen move legal, at 1.0",
                   src.label(i), s);
        Row* out_rows = reinterpret_cast<Row*>(rows.data()) + offs[j];
        const auto rid = static_cast<uint32_t>(ids[j]);
        for (size_t s = 0; s < ns; ++s)
          make_row(out_rows[s], c.boards[s], c.moves[s], &c.values[4 * s], c.legal[s],
                   c.present[s] != 0, rid, static_cast<uint16_t>(s));
        if (!hashers[w]) hashers[w] = std::make_unique<RunHasher>();
        digests[j] = hashers[w]->digest(meta_row(h.meta, ns),
                                        reinterpret_cast<const uint8_t*>(out_rows));
      }); });
      if (take_failures(errors, k, a, skip, src, o, res) == 0) break;
    }

    for (size_t j = 0; j < k; ++j)
      if (!skip[j])
        res.dup_of.push_back(dup.check.add(digests[j], static_cast<int64_t>(ids[j]), a + j));
    if (!dup.check.refusing()) {
      out(rows.data(), rows.size(), offs.data(), k);
      res.crc = crc32c::extend(res.crc, rows.data(), rows.size());
    }
    for (size_t j = 0; j < k; ++j) {
      if (skip[j]) continue;
      res.digests.push_back(digests[j]);
      const run::Meta& m = headers[j].meta;
      const std::string label = src.label(a + j);
      RunRow r;
      r.id = static_cast<int64_t>(ids[j]);
      r.first_step_idx = static_cast<int64_t>(row);
      r.num_steps = static_cast<int64_t>(headers[j].n_steps);
      r.max_score = to_sql_int(m.max_score, "max_score", label);
      r.highest_tile = m.highest_tile;
      r.engine = m.engine;
      r.start_time = to_sql_int(m.start_unix_s, "start_unix_s", label);
      r.elapsed_s = m.elapsed_s;
      res.runs.push_back(std::move(r));
      row += headers[j].n_steps;
      ++next_id;
    }
    res.rows += offs[k];
    // Large payloads are not kept between rounds.
    for (auto& s : scratch)
      if (s.capacity() > (4u << 20)) std::vector<uint8_t>().swap(s);
    if (o.progress && !o.progress(a + k, n))
      fail(A2PACK_E_INTERRUPTED, "stopped after {} of {} runs", a + k, n);
    crash_point(crash_name);
  }
  if (dup.check.refusing())
    fail(A2PACK_E_INVALID_ARGUMENT, "{}", dup.check.refusal(dup.where, res.runs.size(), dup.append));
  return res;
}

}  // namespace a2pack::dataset
