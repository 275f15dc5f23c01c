package i18n

// Messages of the GPU executor (package gpu): profile validation, memory refusals,
// split lines, retryable failures and calibration warnings.
func init() {
	register(map[string]Message{
		"gpu.profile.name_required": {EN: "Give the profile a name.", ZH: "请为配置命名。"},
		"gpu.profile.slots_min": {
			EN: "At least %d slot is needed.",
			ZH: "至少需要 %d 个槽位。",
		},
		"gpu.profile.reserve_range": {
			EN: "The reserve must be between %d%% and %d%% of the card's memory.",
			ZH: "预留比例必须在显存的 %d%% 到 %d%% 之间。",
		},
		"gpu.profile.must_be_positive": {EN: "Must be greater than zero.", ZH: "必须大于零。"},
		"gpu.profile.threshold_over_max_gen": {
			EN: "The long-text threshold (%.0f s) is above the longest generation allowed (%.0f s).",
			ZH: "长文本阈值（%.0f 秒）超过了允许的最长生成时长（%.0f 秒）。",
		},
		"gpu.profile.segment_tokens_max": {
			EN: "Segments of more than %d text tokens are not supported.",
			ZH: "不支持超过 %d 个文本 token 的分段。",
		},
		"gpu.profile.lane_limit_range": {
			EN: "The long-text lane must take between %d and %d requests at once (at most the slot count).",
			ZH: "长文本通道的并发数必须在 %d 到 %d 之间（不超过槽位数）。",
		},
		"gpu.profile.does_not_fit": {
			EN: "This profile cannot run even one slot: a model host needs %.1f GB and a %.1f GB peak for a %.0f s line, but only %.1f GB of the card's %.1f GB can be used (%.0f%% reserve, %.1f GB held by other processes).",
			ZH: "此配置连一个槽位都无法运行：一个模型进程需要 %.1f GB，另需 %.1f GB 峰值显存来生成 %.0f 秒的台词，但只有 %.1f GB 可用（显卡共 %.1f GB，预留 %.0f%%，其他进程占用 %.1f GB）。",
		},
		"gpu.request.never_fits": {
			EN: "This line needs a %.1f GB peak of GPU memory (%.0f s of speech), more than any GPU can give it (at most %.1f GB).",
			ZH: "此台词需要 %.1f GB 的显存峰值（%.0f 秒语音），超过了任何 GPU 能提供的显存（最多 %.1f GB）。",
		},
		"gpu.request.too_long": {
			EN: "This line would be %.0f s of speech; lines longer than %.0f s must be split.",
			ZH: "此台词约为 %.0f 秒语音；超过 %.0f 秒的台词必须拆分。",
		},
		"gpu.split.sentence_too_long": {
			EN: "A sentence is too long to speak in one piece (about %.0f s, the limit is %.0f s): \"%s\". Add punctuation to split it.",
			ZH: "有一句话太长，无法一次生成（约 %.0f 秒，上限为 %.0f 秒）：“%s”。请添加标点以便拆分。",
		},
		"gpu.error.no_gpu": {
			EN: "No GPU is available on this worker.",
			ZH: "此工作节点没有可用的 GPU。",
		},
		"gpu.error.lost": {
			EN: "A GPU (%s) stopped answering. The line will be retried on another GPU.",
			ZH: "一块 GPU（%s）已停止响应，此台词将在其他 GPU 上重试。",
		},
		"gpu.error.host_died": {
			EN: "The model process on a GPU (%s) died. The line will be retried.",
			ZH: "GPU（%s）上的模型进程已退出，此台词将重试。",
		},
		"gpu.error.out_of_memory": {
			EN: "A GPU (%s) ran out of memory. The line will be retried with a larger safety margin.",
			ZH: "GPU（%s）显存不足，此台词将以更大的安全余量重试。",
		},
		"gpu.calibration.leak": {
			EN: "Memory after each run kept rising over %d runs (from %.2f GB to %.2f GB): that is a leak, not a concurrency problem.",
			ZH: "连续 %d 次运行后显存回落值持续上升（从 %.2f GB 到 %.2f GB）：这是内存泄漏，而非并发问题。",
		},
		"gpu.calibration.progress.load": {
			EN: "Loading a model host and measuring its memory",
			ZH: "正在加载模型进程并测量其显存",
		},
		"gpu.calibration.progress.bucket": {
			EN: "Measuring %s lines (%.0f s), run %d of %d",
			ZH: "正在测量%s台词（%.0f 秒），第 %d 次，共 %d 次",
		},
		"gpu.calibration.progress.step": {
			EN: "Load test with %d slots",
			ZH: "正在进行 %d 个槽位的负载测试",
		},
		"gpu.calibration.progress.warmup": {
			EN: "Warming up %d new model hosts",
			ZH: "正在预热 %d 个新模型进程",
		},
		"gpu.calibration.progress.waiting": {
			EN: "Waiting for the GPU's running lines to finish",
			ZH: "正在等待该 GPU 上正在合成的台词完成",
		},
		"gpu.calibration.too_few_runs": {
			EN: "Bucket %s has %d runs; at least %d are needed to trust its peak.",
			ZH: "长度档 %s 只有 %d 次运行；至少需要 %d 次才能采信其峰值。",
		},
	})
}
