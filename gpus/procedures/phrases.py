"""The messages a run records, by code (brickadmin/wording.py): what the engine, the
recorder, the reaper and the run service say, kept as codes so each reader reads them in
their own language. Registered by ``GpusConfig.ready()``. A code, once recorded, keeps its
meaning: change a template's wording freely, never what its parameters are."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy

PHRASES = {
    # run-level events
    "run.created": _("Run created by %(who)s"),
    "run.parameters": _("parameters: %(p)s"),
    "run.claimed": _("Claimed by worker %(w)s"),
    "run.resuming": _("resuming: %(n)d step(s) already done"),
    "run.succeeded": _("Run succeeded"),
    "run.failed": _("Run failed"),
    "run.cancelled": _("Run cancelled"),
    "run.interrupted": _("Run interrupted"),
    "run.all_done": _("All %(n)d steps done."),  # runs recorded before the count left the pre-check out
    "run.all_done_after_precheck": _("Done: %(n)d of %(n)d steps after the pre-check."),
    "run.nothing_to_do": _("Nothing to do"),
    "run.nothing_to_do_why": _("Nothing to do: %(why)s"),
    "run.left_cordoned": _("Node %(node)s may be left cordoned: uncordon it or resume the run."),
    "run.cancelled_during": _("Cancelled during step %(title)s. %(where)s"),
    "run.cancelled_before": _("Cancelled before step %(title)s. %(where)s"),
    "run.cancelled_pending": _("Cancelled by %(who)s before it started."),
    "run.cancel_requested": _("Cancel requested by %(who)s"),
    "run.resumed_by": _("Resumed by %(who)s"),
    "run.resumed_automatically": _("Resumed automatically"),
    "run.checklist_confirmed": _("Checklist confirmed by %(who)s"),
    "run.checklist_installed": _("The NVIDIA driver and nvidia-container-runtime are installed on %(node)s."),
    "run.stopped_at": _("Stopped at %(title)s: %(error)s"),
    "run.database_outage": _(
        "The database was unavailable for %(s).1f s (%(err)s); the run continued from the step it was in "
        "(steps are idempotent)."
    ),
    "run.database_unavailable": _("Database unavailable"),
    "run.heartbeat_resumed": _(
        "The worker %(w)s stopped sending heartbeats (last at %(t)s); the run was resumed "
        "automatically from the step it was in (steps are idempotent)."
    ),
    "run.heartbeat_interrupted": _(
        "Interrupted: the worker %(w)s stopped sending heartbeats (last at %(t)s), and the run was "
        "already resumed automatically %(n)d times. Resume the run to continue from the step it "
        "was in; steps are idempotent."
    ),
    # one step's events
    "step.nothing_sent": _("Nothing to do: nothing was sent for this step."),
    "step.cancelled_before": _("Cancelled before this step; nothing was sent for it."),
    "step.cancelled_waiting": _("Cancelled while this step was waiting."),
    "step.cancelled_waiting_sent": _("Cancelled while this step was waiting; its change was sent but not verified."),
    "step.transient": _("Transient API error (%(err)s); retrying in %(d).1fs (attempt %(a)d of %(m)d)."),
    "step.kept_failing": _(
        "The API server kept failing (%(err)s) after %(m)d attempts. Check the cluster is reachable, then resume."
    ),
    "step.refused": _(
        "The API server refused the request (%(err)s). This will not succeed by retrying: fix the cause, then resume."
    ),
    "step.unexpected": _("Unexpected error in this step (%(err)s). Check the worker log, then resume."),
    # a write to the API server in words (recording.call_words); other calls keep their call form
    "call.cordon": _("cordon node %(node)s"),
    "call.uncordon": _("uncordon node %(node)s"),
    "call.drain": _("drain node %(node)s"),
    "call.label_node": _("set labels on node %(node)s: %(labels)s"),
    "call.label_set": "%(key)s=%(value)s",
    "call.label_removed": _("remove %(key)s"),
    "call.apply": _("apply %(obj)s"),
    "call.delete": _("delete %(obj)s"),
    "call.create": _("create %(obj)s"),
    "call.remove_resources": _("remove %(res)s from the status of node %(node)s"),
    "call.rollout_restart": _("restart the pods of %(obj)s"),
    "request.intended": _("about to send: %(call)s"),
    "request.sent": _("sent: %(call)s"),
    "request.failed": _("not accepted: %(call)s"),
    # the notes runs leave on the manifest versions they save
    "manifest.replicas_set": _("procedure C run #%(id)d: replicas %(have)s -> %(want)d"),
    "manifest.toleration_added": _("fix run #%(id)d: tolerate %(taint)s"),
    # what a step found and did (its output, its check, what to fix): steps.py, catalogue/
    "step.no_nvidia_resource": _("(no nvidia.com resource)"),
    "step.already_cordoned": _("node/%(node)s already cordoned"),
    "step.fix_cordon": _("Cordon the node: kubectl cordon %(node)s"),
    "step.cordoned_verified": _("spec.unschedulable is true"),
    "step.still_schedulable": _("node is still schedulable"),
    "step.nothing_to_evict": _("no pod to evict (DaemonSet pods are ignored)"),
    "step.drain_blocked_by_pdbs": _(
        "The drain is blocked by PodDisruptionBudgets: %(items)s. Move or scale the workload so the budget "
        "allows an eviction (or relax the budget with its owner), then resume this run. The node stays "
        "cordoned meanwhile."
    ),
    "step.drain_pods_left": _(
        "Pods are still on the node: %(items)s. Wait for them to terminate or delete them, then resume this run."
    ),
    "step.drained": _("no evictable pod left on %(node)s"),
    "step.pod_protected_by_pdb": _("%(pod)s is protected by PodDisruptionBudget %(pdb)s"),
    "step.pod_still_on_node": _("%(pod)s is still on the node"),
    "step.label_already": _("label already %(label)s=%(value)s"),
    "step.fix_label": _("Set the label exactly: %(cmd)s"),
    "step.labels_already_set": _("labels already set"),
    "step.fix_both_labels": _("Set both labels in one command: %(cmd)s"),
    "step.plugin_pod_not_running": _(
        "The %(component)s plugin pod on %(node)s is not Running. If it is Pending, the DaemonSet lacks a "
        "toleration for the node's taints: keep both DaemonSets' tolerations identical in the managed "
        "manifest and apply it, then resume."
    ),
    "step.no_plugin_pod": _(
        "No %(component)s plugin pod on %(node)s. Check the label is exactly %(label)s=%(value)s and that "
        "the DaemonSet tolerates the node's taints (both DaemonSets need identical tolerations); fix the "
        "managed manifest, apply it, then resume."
    ),
    "step.no_resources_found": _("No resources found"),
    "step.no_mps_daemon": _(
        "No MPS control daemon Running on %(node)s: its DaemonSet selects %(label)s=true. Check the label, "
        "that the managed manifest holds the MPS control daemon and that it tolerates the node's taints; "
        "then resume."
    ),
    "step.allocatable_expected": _("expected %(res)s = %(p)d physical (%(src)s) × %(r)d = %(e)d"),
    "step.allocatable_wrong": _(
        "allocatable %(res)s is %(got)d, not %(e)d. The plugin reads its config only at start: if replicas "
        "were changed without a rollout restart, restart the plugin (procedure C); otherwise check the "
        "plugin pod's log."
    ),
    "step.no_physical_gpu": _(
        "No physical GPU is known on %(node)s. Check the driver and the container runtime are installed and "
        "the DCGM exporter runs there."
    ),
    "step.no_stale": _("no stale %(res)s in capacity or allocatable"),
    "step.stale_still_in_status": _(
        "%(res)s is still in the node status. Patch it again (never delete the kubelet checkpoint file: that "
        "brings the stale capacity back as allocatable)."
    ),
    "step.stale_left": _("Stale resources left: %(res)s. Remove them with the status patch of step 6."),
    "step.already_schedulable": _("node/%(node)s already schedulable"),
    "step.fix_uncordon": _("Uncordon the node: kubectl uncordon %(node)s"),
    "step.schedulable": _("schedulable"),
    "step.still_cordoned": _("still cordoned"),
    "step.prometheus_fell_back": _(
        "%(why)s: fell back to the cluster's allocatable (kubelet status), not Prometheus. %(res)s = %(got)d "
        "(expected %(e)d)"
    ),
    "step.prometheus_wrong": _(
        "Prometheus shows %(metric)s = %(got)s on %(node)s, expected %(e)d. kube-state-metrics may not have "
        "been scraped yet; check its scrape target, then resume."
    ),
    "step.allocatable_mismatch": _("Allocatable on %(node)s is %(got)d, expected %(e)d."),
    "step.no_series": _("no series"),
    "step.prometheus_not_configured": _("Prometheus is not configured"),
    "step.checklist_confirmed": _("Confirmed by %(who)s: driver and container runtime are installed on %(node)s."),
    "step.checklist_missing": _("The checklist was not confirmed."),
    "step.checklist_fix": _(
        "Install the NVIDIA driver and nvidia-container-runtime on the node, then confirm the checklist on "
        "this run's page (or: manage.py procedure resume RUN --confirm-checklist)."
    ),
    "step.node_before": _("Node before the run: %(labels)s; %(state)s"),
    "step.cordoned": _("cordoned"),
    "step.acknowledgement_missing": _(
        "This run needs an explicit acknowledgement: %(what)s Start the wizard again and tick the acknowledgement."
    ),
    "step.manifest_replicas_moved": _("manifest v%(a)d -> v%(b)d: replicas %(x)s -> %(y)d"),
    "step.manifest_has_replicas": _("manifest v%(v)d already has replicas %(r)d"),
    "step.manifest_state": _("manifest v%(v)d: %(state)s"),
    "step.manifest_valid": _("valid"),
    "step.new_node_no_status_patch": _("A new node has no stale resource: no status patch needed."),
    "step.stays_cordoned": _("The node was cordoned before the run: it stays cordoned."),
    "step.on_node": "%(node)s: %(text)s",  # a node's name before what was found there
    "step.fix_manifest": _("Fix the managed manifest (Manifest page), then resume."),
    "step.live_objects_match": _("live objects already match manifest v%(v)d"),
    "step.live_objects_differ": _("Live objects differ from the manifest: %(x)s"),
    "step.restarted_by_this_run": _("already restarted by this run (restartedAt %(t)s)"),
    "step.restarted_after_apply": _("already restarted at %(t)s, after the apply"),
    "step.rollout_unfinished": _(
        "The rollout did not finish: check the plugin pods in %(ns)s (Pending means a missing toleration)."
    ),
    "step.replicas_not_reflected": _(
        "Not reflected on %(nodes)s: the plugin there did not restart (rollout restart skipped?) or its pod "
        "is not Running."
    ),
    "step.no_time_slicing_node": _("no time-slicing node"),
    "step.no_nvidia_resource_bare": _("no nvidia.com resource"),
    "step.mig_go_back": _(
        "To go back to the previous layout (%(label)s=%(prev)s), use Restore the node on this run's page."
    ),
    "step.mig_refused": _(
        "mig-manager reported %(reported)s: it did not apply %(config)s on %(node)s (%(why)s). The GPUs keep "
        "their previous layout."
    ),
    "step.mig_late": _(
        "mig-manager did not report success in time (it reported %(reported)s): read the nvidia-mig-manager "
        "pod's log on %(node)s, then resume the run."
    ),
    "step.mig_read_log": _("read the nvidia-mig-manager pod's log on the node"),
    "step.mig_advertised": _("advertised: %(got)s; expected for %(config)s: %(want)s"),
    "step.mig_not_advertised": _(
        "%(node)s does not advertise the new layout yet: the device plugin restarts after mig-manager's "
        "change. Check its pod on the node, then resume."
    ),
    "step.labels_already_restored": _("labels already as they were before the run"),
    "step.fix_labels_by_hand": _("Set the labels by hand: %(cmd)s"),
    "step.no_label_to_put_back": _("no label to put back"),
    "step.notice_recorded": _("notice recorded for %(owner)s on Workspace %(ns)s"),
    "step.owner_already_told": _("the owner was already told by this run"),
    # why mig-manager refuses a layout (brickadmin/cluster/mig.py REASONS: the same English)
    "mig.no_profiles": _("%(model)s has no MIG profiles"),
    "mig.model_no_profiles": _("this GPU model has no MIG profiles"),
    "mig.no_profile": _("%(model)s has no MIG profile %(profile)s"),
    "mig.at_most": _("%(model)s holds at most %(most)s × %(profile)s"),
    "mig.slices": _("%(model)s has %(total)s compute slices; this layout needs %(used)s"),
    "mig.no_config": _("no MIG config named '%(name)s' in the mig-parted config"),
    "mig.gpu_reason": "GPU %(index)s: %(reason)s",  # no words of its own
    "mig.not_yaml": _("not YAML: %(err)s"),
    "mig.no_parted_config": _("no mig-parted config"),
    "mig.unknown_version": _("unknown version %(version)s (mig-parted reads v1)"),
    "mig.no_mig_configs": _("no mig-configs"),
    "mig.config_not_a_list": _("%(name)s: a config is a list of device entries"),
    "mig.bad_devices": _("%(name)s: devices must be 'all' or a list of GPU indexes"),
    "mig.bad_mig_enabled": _("%(name)s: mig-enabled must be true or false"),
    "mig.bad_mig_devices": _("%(name)s: mig-devices maps a profile to a count"),
    "mig.bad_device_filter": _("%(name)s: device-filter must be a PCI device id or a list of them"),
    # what a fix tells the Workspace's owner (gpus.models.OwnerNotice, and the notification)
    "notice.it_failed": _("it failed"),
    "notice.admin_acted_subject": _("An admin acted on %(subject)s"),
    "notice.by_admin": _("%(message)s (by %(admin)s)"),
    "notice.failed_pod_deleted": _(
        "Pod %(pod)s failed on node %(node)s and was not started: %(why)s An admin (%(who)s) deleted it "
        "so it no longer holds your Workspace's resources. Recreate it once you have read why it "
        "failed."
    ),
    "step.notice_shown": _("the owner's Workspace page shows the notice"),
    "step.no_notice_recorded": _("no notice recorded"),
    "step.pod_already_gone": _("pod already gone"),
    "step.fix_delete_pod": _("Delete it by hand: %(cmd)s"),
    "step.pod_gone": _("pod gone"),
    "step.pod_still_there": _("pod still there"),
    "step.manifest_moved": _("manifest v%(a)d -> v%(b)d"),
    "step.manifest_tolerates": _("manifest v%(v)d already tolerates %(t)s"),
    "step.manifest_version": _("manifest v%(v)d"),
    "step.no_running_plugin_pod": _(
        "No Running plugin pod on %(node)s yet: another taint may be untolerated, or the sharing label "
        "selects no DaemonSet. Read the Health page, then resume."
    ),
    # what a procedure's pre-checks find (the plan page, and step 0 of its run): catalogue/
    "precheck.line": "[%(level)s] %(text)s",  # a check's level before what it found
    "precheck.item": "%(first)s\n  %(rest)s",  # a check and the lines it lists, indented under it
    "precheck.none": _("none"),
    "precheck.not_configured": _("not configured"),
    "precheck.workspace_quota": _("%(ns)s (owner %(owner)s): %(n)d"),
    "precheck.workspace_owner": _("%(ns)s (owner %(owner)s)"),
    "precheck.over_allocated_by": _("none (over-allocated by %(n)d)"),
    "precheck.capacity_line": _("%(res)s: Total %(t)d → %(t2)d, Allocated %(a)d → %(a2)d, Available %(v)s → %(v2)s"),
    "precheck.capacity_blocked": _("Capacity after the run (blocked above):"),
    "precheck.capacity_kept": _("Capacity after the run: every GPU type keeps at least its allocated quota."),
    "precheck.capacity_once_advertised": _(
        "Capacity after the run: the Totals change only once the node advertises its GPUs."
    ),
    "precheck.capacity_over": _(
        "This run leaves %(types)s with less capacity than its allocated quota: users will see none "
        "available and pods within their quota may stay Pending. Lower the Workspace quotas first, "
        "or acknowledge it."
    ),
    "precheck.not_gpu_node": _("%(node)s is not a GPU node."),
    "precheck.fix_use_d": _("Use procedure D to add a GPU node."),
    "precheck.node_summary": _("%(node)s: %(mode)s, %(p)d physical GPU(s), sharing label %(label)s"),
    "precheck.label_unrecognised": _("The sharing label value %(v)s is not recognised; this run sets it to %(t)s."),
    "precheck.evicted_pod": _("%(pod)s · Workspace %(ws)s · owner %(owner)s · GPU %(gpu)s"),
    "precheck.no_workspace": _("none (namespace %(ns)s)"),
    "precheck.gpu_pods_evicted": ngettext_lazy(
        "%(n)d GPU pod on %(node)s will be evicted (%(all)d pod(s) in all):",
        "%(n)d GPU pods on %(node)s will be evicted (%(all)d pod(s) in all):",
        "n",
    ),
    "precheck.mig_stays": ngettext_lazy(
        "%(n)d GPU of %(node)s is in MIG mode (%(profiles)s) and stays in MIG mode: the time-slicing "
        "plugin shares whole GPUs only, so its MIG instances are no longer offered to pods and it "
        "serves nothing until its MIG layout changes.",
        "%(n)d GPUs of %(node)s are in MIG mode (%(profiles)s) and stay in MIG mode: the time-slicing "
        "plugin shares whole GPUs only, so their MIG instances are no longer offered to pods and they "
        "serve nothing until their MIG layout changes.",
        "n",
    ),
    "precheck.fix_mig_first": _(
        "To time-slice them too, set the layout all-disabled with M. Change a node's MIG layout first."
    ),
    "precheck.pods_evicted": _("%(n)d pod(s) without a GPU on %(node)s will be evicted:"),
    "precheck.no_pod_to_evict": _("No pod to evict on %(node)s (DaemonSet and mirror pods stay)."),
    "precheck.daemonset_missing": _("DaemonSet %(ns)s/%(name)s does not exist."),
    "precheck.fix_apply_manifest": _("Apply the managed device-plugin manifest first (Manifest page)."),
    "precheck.taints_untolerated": _(
        "DaemonSet %(name)s does not tolerate the taint(s) %(taints)s of %(node)s: its plugin "
        "pod would never start there."
    ),
    "precheck.node_condition_taints": _(
        "%(node)s carries %(taints)s, which Kubernetes sets while the node is not Ready or under "
        "pressure: no new plugin pod starts there until it is lifted."
    ),
    "precheck.fix_wait_node_ready": _(
        "Wait until %(node)s is Ready and the taint is gone (kubectl describe node %(node)s says why "
        "it is not), then start again."
    ),
    "precheck.fix_add_toleration": _(
        "Add the toleration to both DaemonSets (they must stay identical) in the managed manifest, "
        "apply it, then start again."
    ),
    "precheck.not_brick_node": _(
        "Not a BRICK-convention node (GPU Operator or unlabelled): the wizards follow the BRICK labels. "
        "Use procedure D to add it."
    ),
    "precheck.already_timeslicing": _("Already time-slicing."),
    "precheck.already_exclusive": _("Already exclusive."),
    "precheck.already_mps": _("Already MPS."),
    "precheck.not_mps": _("Not an MPS node: its label %(label)s is not mps."),
    "precheck.on_mps_use_h_or_j": _(
        "An MPS node: convert it with H (MPS → Exclusive) or J (MPS → Time-slicing), which also take "
        "nvidia.com/mps.capable away."
    ),
    "precheck.not_source_mode": _("This procedure does not convert a node in mode %(mode)s."),
    "precheck.mps_of_mig": ngettext_lazy(
        "%(n)d GPU of %(node)s is in MIG mode: the device plugin refuses MPS on MIG devices and would serve nothing.",
        "%(n)d GPUs of %(node)s are in MIG mode: the device plugin refuses MPS on MIG devices and would serve nothing.",
        "n",
    ),
    "precheck.fix_mig_off_for_mps": _("Set the layout all-disabled with M first, then convert to MPS."),
    "precheck.source_cluster": _("the cluster (Prometheus unavailable: %(why)s)"),
    "precheck.shared_left": _(
        "Shared total left after removing %(node)s: %(t)d; shared quota allocated: %(a)d (from %(src)s)."
    ),
    "precheck.fix_lower_shared": _(
        "Lower the shared GPU quotas by %(d)d in total before converting "
        "%(node)s. Workspaces holding shared quota: %(ws)s."
    ),
    "precheck.only_timeslicing_node": _(
        "%(node)s is the only time-slicing node: its shared GPU pods will have "
        "nowhere to go and stay Pending. Affected Workspaces: %(ws)s. Agree with "
        "their owners first."
    ),
    "precheck.replicas_not_whole": _("Replicas must be a whole number."),
    "precheck.replicas_too_few": _("Replicas must be at least 2 (1 is not sharing)."),
    "precheck.mps_too_many_clients": _(
        "The time-slicing ConfigMap shares by MPS, and one MPS server takes at most %(most)d clients per GPU "
        "on %(node)s (compute capability %(cc)s): the plugin would refuse %(r)d replicas and its nodes would "
        "offer no GPU."
    ),
    "precheck.fix_mps_clients": _("Choose at most %(most)d replicas."),
    "precheck.replicas_change": _(
        "Replicas %(a)d → %(b)d on %(n)d time-slicing node(s): shared total %(t)d → %(u)d; "
        "shared quota allocated %(q)d."
    ),
    "precheck.replicas_already": _(
        "The manifest already says %(r)d: the run re-applies and restarts the plugin so every node reflects it."
    ),
    "precheck.replicas_increase": _(
        "Increasing replicas makes the shared Total jump to %(u)d at once while "
        "quotas stay the same, so Available looks larger (+%(d)d). Check that this "
        "is intended."
    ),
    "precheck.shared_quota_over": _("Allocated shared quota %(q)d would not fit under the new Total %(u)d."),
    "precheck.fix_lower_shared_quotas": _("Lower shared quotas by %(d)d in total first. Workspaces: %(ws)s."),
    "precheck.choose_sharing": _("Choose the sharing mode: none or timeslicing."),
    "precheck.no_such_node": _("No node named %(node)s."),
    "precheck.new_gpu_node": _("%(node)s has no GPU labels yet; it will get %(t)s=nvidia and %(s)s=%(v)s."),
    "precheck.already_gpu_node": _("Already a GPU node (%(l)s=%(v)s)."),
    "precheck.gpu_operator_node": _("Managed by the GPU Operator convention."),
    "precheck.control_plane_node": _("Control-plane node."),
    "precheck.mig_configmap_missing": _("ConfigMap %(ns)s/%(name)s (mig-manager's layouts) does not exist."),
    "precheck.mig_configmap_invalid": _("ConfigMap %(ns)s/%(name)s is not a mig-parted config: %(err)s"),
    "precheck.no_mig_manager": _(
        "mig-manager does not run on this node (the GPU Operator labels the nodes it runs on %(label)s=true)."
    ),
    "precheck.dra_partitions": _(
        "NVIDIA's DRA driver partitions this node's GPUs when claims ask (dynamic MIG): its MIG layout is the "
        "claims', not mig-manager's. Stop mig-manager here (%(label)s=false, the Fix on Health)."
    ),
    "precheck.fix_mig_configmap": _("Install or fix mig-manager's ConfigMap, then start again."),
    "precheck.mig_would_refuse": _("mig-manager would refuse %(config)s on %(node)s: %(why)s"),
    "precheck.fix_choose_layout": _("Choose a layout its GPUs can hold."),
    "precheck.mig_summary": _(
        "%(node)s: %(label)s=%(now)s (%(state)s) → %(config)s. It advertises %(before)s; after: %(after)s."
    ),
    "precheck.mig_already_labelled": _("The node is labelled %(config)s already: mig-manager is not asked again."),
    "precheck.mig_guessed": _(
        "Guessed for GPU %(gpus)s (%(model)s): mig-manager picks the entries of %(config)s by PCI device id, "
        "and neither the node nor NVIDIA's PCI id list says this GPU's; the figures take the entries whose "
        "profiles the model holds."
    ),
    "precheck.quota_over": _("Allocated %(res)s quota %(q)d would not fit under its new Total %(u)d."),
    "precheck.fix_lower_quotas": _(
        "Lower the %(res)s quotas by %(d)d in total first, or choose another layout. Workspaces: %(ws)s."
    ),
    "precheck.nothing_to_restore": _(
        "%(node)s is not left cordoned or relabelled by run #%(id)s (or a later run changed it): nothing to restore."
    ),
    "precheck.restore_from_run": _("A restore is started from the page of the run it undoes."),
    "precheck.fix_restore_from_run": _("Open the failed, cancelled or interrupted run and use Restore the node there."),
    "precheck.nothing_to_do_now": _("Nothing to do now: %(why)s A run would end without changing anything."),
    "precheck.restore_node_now": _("%(node)s now: %(labels)s; %(state)s. Run #%(id)s left it so."),
    "precheck.object_gone": _("The object is gone: reload the Health page."),
    "precheck.stale_serves_now": _("%(res)s is the resource %(node)s serves now (%(label)s=%(v)s), not a stale one."),
    "precheck.stale_gone": _("%(res)s is no longer in the status of %(node)s."),
    "precheck.stale_found": _(
        "%(node)s: %(res)s is stale (capacity %(c)s, allocatable %(a)s); the patch removes it "
        "from capacity and allocatable. Never delete the kubelet checkpoint file instead."
    ),
    "precheck.replicas_reflected": _("Every time-slicing node already advertises the configured replicas (%(r)d)."),
    "precheck.not_reflected_on": _(
        "Not reflected on: %(nodes)s. The restart reloads the config on every time-slicing "
        "node; their shared GPU pods keep running."
    ),
    "precheck.pod_gone": _("Pod %(pod)s is gone."),
    "precheck.pod_not_failed": _("Pod %(pod)s is no longer Failed (%(phase)s)."),
    "precheck.pod_not_in_workspace": _(
        "Pod %(pod)s is in namespace %(ns)s, which is not a Workspace: the console deletes "
        "failed pods only in Workspace namespaces."
    ),
    "precheck.pod_failed": _("Pod %(pod)s failed on %(node)s: %(reason)s %(message)s"),
    "precheck.owner_will_see": _(
        "Its owner %(owner)s will see a notice on Workspace %(ns)s saying what happened; the pod "
        "must then be recreated by them."
    ),
    "precheck.taint_gone": _("%(node)s no longer has the taint %(t)s."),
    "precheck.taint_tolerated": _("Both device-plugin DaemonSets already tolerate %(t)s."),
    "precheck.toleration_added": _(
        "Manifest v%(v)d gets the toleration %(tol)s in both DaemonSets (a new version), then "
        "is applied; the plugin pod can then start on %(node)s and every node with that "
        "taint."
    ),
    "precheck.fix_manifest_first": _("Fix the managed manifest first (Manifest page)."),
    "precheck.apply_undoes_drift": _(
        "The apply also brings these live objects back to manifest v%(v)d (they differ from it now):"
    ),
    "precheck.not_cordoned": _("%(node)s is not cordoned."),
    "precheck.cordoned_holds": _(
        "%(node)s is cordoned: %(n)d logical GPU(s) take no new pods. Uncordon it only when no "
        "maintenance is under way on it."
    ),
    # GPUs under DRA: a DeviceTaintRule on one GPU (G, X), a node between the stacks (K, L)
    "dra.rule_already": _("DeviceTaintRule %(name)s already has this taint"),
    "dra.rule_created_by_run": _("DeviceTaintRule %(name)s is created by this run (Restore deletes it)"),
    "dra.rule_missing": _("No DeviceTaintRule %(name)s."),
    "dra.fix_rule_api": _(
        "Check that the cluster serves DeviceTaintRule (Kubernetes 1.37, or the DRADeviceTaintRules gate), "
        "then create it: %(cmd)s"
    ),
    "dra.no_rule_left": _("no DeviceTaintRule left to delete"),
    "dra.rules_left": _("DeviceTaintRules still there: %(names)s"),
    "dra.fix_delete_rule": _("Delete them by hand: kubectl delete devicetaintrule %(names)s"),
    "dra.no_rule_on_device": _(
        "No DeviceTaintRule selects %(device)s of %(pool)s now (a taint the driver set itself goes when the "
        "GPU is healthy again)."
    ),
    "dra.rules_to_delete": _("%(n)d DeviceTaintRule(s) on %(device)s will be deleted:"),
    "dra.driver_taint_stays": _(
        "%(device)s also carries a taint set by the driver (an unhealthy GPU): it stays until the GPU is healthy again."
    ),
    "dra.no_dra_device": _("This node publishes no GPU through DRA."),
    "dra.choose_effect": _("Choose the effect: None, NoSchedule or NoExecute."),
    "dra.no_such_device": _("%(node)s publishes no DRA device named %(device)s."),
    "dra.fix_pick_device": _("Pick one of the node's devices on the node's page."),
    "dra.rules_already_on": _("DeviceTaintRules already on %(device)s: %(rules)s"),
    "dra.pod_on_device": _("%(pod)s uses %(device)s"),
    "dra.dry_run": _(
        "Dry run (effect None): nothing changes. With NoExecute, %(n)d pod(s) using %(device)s would be evicted:"
    ),
    "dra.no_schedule": _("NoSchedule: no new claim is allocated %(device)s; the %(n)d pod(s) using it keep running."),
    "dra.no_execute_evicts": _("NoExecute: the %(n)d pod(s) using %(device)s will be evicted:"),
    "dra.no_execute_nobody": _("NoExecute: no pod uses %(device)s, so nothing is evicted."),
    "dra.not_gpu_node": _("%(node)s serves no GPU through the device plugin or DRA."),
    "dra.already_dra": _("The node is already served by DRA only."),
    "dra.already_device_plugin": _("The node is already served by the device plugin only."),
    "dra.operator": _("GPU Operator labels"),
    "dra.brick": _("BRICK labels"),
    "dra.move_summary": _("%(node)s: stack now %(stack)s (%(convention)s); labels to set: %(labels)s"),
    "dra.quota_loses": _("%(ws)d Workspace(s) hold quota on %(res)s: the %(n)d this node serves leave the Total."),
    "dra.no_slices": _("%(node)s publishes no ResourceSlice of gpu.nvidia.com."),
    "dra.fix_no_slices": _(
        "Check that NVIDIA's DRA kubelet plugin runs on %(node)s (its DaemonSet selects %(label)s=true) and "
        "that its logs show the GPUs, then resume."
    ),
    "dra.pool_seen": _("pool %(pool)s generation %(gen)d: %(seen)d of %(expected)d slice(s) seen"),
    "dra.devices_published": _("%(n)d device(s) published"),
    "dra.fix_incomplete_pool": _(
        "The pool of %(node)s is not complete yet (the scheduler allocates nothing from it): wait for the "
        "plugin to publish all its slices, then resume."
    ),
    "dra.no_plugin_resource": _("no nvidia.com/* resource in node status"),
    "dra.plugin_resources_left": _("still in allocatable: %(res)s"),
    "dra.fix_plugin_still_serves": _(
        "The device plugin still serves %(node)s: check that its DaemonSet no longer selects the node, then resume."
    ),
    "dra.slices_left": _("slices still published: %(names)s"),
    "dra.fix_slices_left": _(
        "NVIDIA's DRA kubelet plugin still runs on %(node)s: check that its DaemonSet selects only "
        "%(label)s=true (the standalone chart's default selects every GPU node), then resume."
    ),
    "dra.fix_plugin_not_back": _(
        "The device plugin does not advertise %(res)s on %(node)s: check its pod there (labels, taints), then resume."
    ),
    "dra.fix_labels": _("Set the labels exactly: %(cmd)s"),
    "step.rules_deleted_by_restore": _("DeviceTaintRules the run created: %(names)s"),
    # mig-manager off a node whose GPUs DRA partitions (N)
    "mig_manager.label_already": _("%(label)s is already false"),
    "mig_manager.fix_label": _("Set the label by hand: %(cmd)s"),
    "mig_manager.pods_left": _("mig-manager pods still on the node: %(pods)s"),
    "mig_manager.gone": _("no mig-manager pod on %(node)s"),
    "mig_manager.fix_pods_left": _(
        "The GPU Operator removes mig-manager's pod from a node labelled %(label)s=false: check its DaemonSet's "
        "nodeSelector in namespace %(ns)s, then resume."
    ),
    "mig_manager.already_off": _("mig-manager is already off on %(node)s (%(label)s=false, no pod of it there)."),
    "mig_manager.not_dynamic_mig": _("%(node)s has no GPU that NVIDIA's DRA driver partitions when claimed."),
    "mig_manager.runs": _(
        "mig-manager runs on %(node)s (%(signs)s) beside the DRA driver's dynamic MIG: labelling it %(label)s=false "
        "stops it. No pod is evicted and the MIG devices claims hold stay."
    ),
    "mig_manager.config_stays": _(
        "%(label)s=%(value)s stays on the node, unused while mig-manager is off; remove it if no one means to "
        "turn mig-manager back on."
    ),
}
