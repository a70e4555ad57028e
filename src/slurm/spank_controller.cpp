#include "slurm/spank_controller.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "slurm/spank_timing.h"

extern "C" {
#include <slurm/slurm.h>
}

namespace tally::slurm::plugin {

namespace {

// The controller calls, as each Slurm release spells them (the slurm.h of
// each release, 22.05 to 26.05): 25.11 names a step by slurm_step_id_t in
// slurm_get_job_steps and job_desc_msg_t's job_id became step_id; 26.05 takes
// slurm_step_id_t in slurm_load_job too (its C header picks either form with
// _Generic, which C++ lacks). slurm_get_errno() is gone since 24.11: Slurm's
// API sets errno.
int loadStep(std::uint32_t job, std::uint32_t step, job_step_info_response_msg_t** steps) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
  slurm_step_id_t id{};
  id.job_id = job;
  id.step_het_comp = NO_VAL;
  id.step_id = step;
  return slurm_get_job_steps(&id, steps, SHOW_ALL);
#else
  return slurm_get_job_steps(0, job, step, steps, SHOW_ALL);
#endif
}

int loadJob(std::uint32_t job, job_info_msg_t** jobs, std::uint16_t show) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
  slurm_step_id_t id{};
  id.job_id = job;
  id.step_het_comp = NO_VAL;
  id.step_id = NO_VAL;
  return slurm_load_job(jobs, id, show);
#else
  return slurm_load_job(jobs, job, show);
#endif
}

// slurmctld's record of `job` (slurm_load_job), handed to `use` while it is
// held; an error (errno's) when slurmctld cannot be asked. `show`: SHOW_DETAIL
// for the per-node GRES (gres_detail_str); 0 packs the rest, comments
// included, for less of slurmctld's work.
template <typename Use>
Status withJob(std::uint32_t job, std::uint16_t show, Use&& use) {
  job_info_msg_t* jobs = nullptr;
  if (loadJob(job, &jobs, show) != SLURM_SUCCESS || !jobs) {
    int err = errno;
    return Error{err, slurm_strerror(err)};
  }
  for (std::uint32_t i = 0; i < jobs->record_count; ++i)
    if (jobs->job_array[i].job_id == job) use(jobs->job_array[i]);
  slurm_free_job_info_msg(jobs);
  return Ok{};
}

Result<JobComment> adminCommentOf(std::uint32_t job) {
  JobComment found;
  PhaseTimer timer("comment-load");
  auto loaded = withJob(job, 0, [&](const slurm_job_info_t& j) {
    if (j.admin_comment) found.comment = j.admin_comment;
    if (j.batch_host) found.batchHost = j.batch_host;
  });
  if (!loaded) return loaded.error();
  return found;
}

Status setAdminComment(std::uint32_t job, const std::string& comment) {
  job_desc_msg_t update;
  slurm_init_job_desc_msg(&update);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
  update.step_id.job_id = job;
#else
  update.job_id = job;
#endif
  std::string text = comment;  // the API takes char*; it does not keep it
  update.admin_comment = text.data();
  PhaseTimer timer("comment-update");
  if (slurm_update_job(&update) != SLURM_SUCCESS) {
    int err = errno;
    return Error{err, slurm_strerror(err)};
  }
  return Ok{};
}

Result<JobRecord> jobFromSlurmctld(std::uint32_t job, const NodeRef& node,
                                   const std::vector<std::string>& names) {
  JobRecord record;
  record.job = job;
  record.asked = names;
  Status parsed = Ok{};
  PhaseTimer timer("job-record");
  auto loaded = withJob(job, SHOW_DETAIL, [&](const slurm_job_info_t& j) {
    if (!parsed) return;
    if (j.het_job_id != 0 && j.het_job_id != NO_VAL && j.het_job_offset != NO_VAL)
      record.het = HetJob{j.het_job_id, j.het_job_offset};
    // slurmctld's, for the lease's slurm_account/slurm_partition (the job's
    // environment is the user's to set).
    if (j.account) record.account = j.account;
    if (j.partition) record.partition = j.partition;
    int index = node.jobIndex;
    if (j.nodes && !node.name.empty()) {
      auto hl = slurm_hostlist_create(j.nodes);
      if (hl) {
        index = slurm_hostlist_find(hl, node.name.c_str());
        slurm_hostlist_destroy(hl);
      }
    }
    Result<std::optional<GresFound>> gres = std::optional<GresFound>{};
    if (index >= 0 && static_cast<std::uint32_t>(index) < j.gres_detail_cnt && j.gres_detail_str &&
        j.gres_detail_str[index]) {
      gres = firstGres(j.gres_detail_str[index], names);
      record.anyGres = j.gres_detail_str[index][0] != '\0';
    }
    if (j.tres_per_node && std::strstr(j.tres_per_node, "gres") != nullptr) record.anyGres = true;
    if (gres && !*gres && j.tres_per_node) gres = firstGres(j.tres_per_node, names);
    if (gres)
      record.gres = *gres;
    else
      parsed = gres.error();
  });
  if (!loaded)
    return Error{loaded.error().code, fmt::format("slurmctld did not answer for job {}'s GRES: {}",
                                                  job, loaded.error().message)};
  if (!parsed) return parsed.error();
  return record;
}

Result<std::optional<GresFound>> stepGresFromSlurmctld(std::uint32_t job, std::uint32_t step,
                                                       const std::vector<std::string>& names) {
  std::optional<GresFound> own;
  job_step_info_response_msg_t* steps = nullptr;
  {
    PhaseTimer timer("step-request");
    if (loadStep(job, step, &steps) != SLURM_SUCCESS || !steps) return own;
  }
  Status bad = Ok{};
  for (std::uint32_t i = 0; i < steps->job_step_count && bad; ++i) {
    const auto& s = steps->job_steps[i];
    if (s.step_id.step_id != step || !s.tres_per_node) continue;
    auto found = firstGres(s.tres_per_node, names);
    if (!found)
      bad = found.error();
    else
      own = *found;
  }
  slurm_free_job_step_info_response_msg(steps);
  if (!bad) return bad.error();
  return own;
}

constexpr Controller kSlurmctld{jobFromSlurmctld, stepGresFromSlurmctld, adminCommentOf,
                                setAdminComment, ESLURM_JOB_FINISHED};

}  // namespace

const Controller& slurmctld() { return kSlurmctld; }

}  // namespace tally::slurm::plugin
