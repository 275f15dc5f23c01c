package i18n

// Messages of the live status and the managers' dashboard.
func init() {
	register(map[string]Message{
		"live.on":  {EN: "Live", ZH: "实时更新中"},
		"live.off": {EN: "Reconnecting…", ZH: "正在重新连接…"},

		"dash.title":           {EN: "Dashboard", ZH: "看板"},
		"dash.open_editor":     {EN: "Open the script", ZH: "打开脚本"},
		"dash.no_projects":     {EN: "No active projects.", ZH: "没有进行中的项目。"},
		"dash.audio":           {EN: "Audio done", ZH: "已完成音频"},
		"dash.audio_value":     {EN: "%s of %s min", ZH: "%s / %s 分钟"},
		"dash.remaining":       {EN: "%s min to go", ZH: "剩余 %s 分钟"},
		"dash.lines_per_min":   {EN: "Lines / min", ZH: "句 / 分钟"},
		"dash.audio_per_hour":  {EN: "Audio min / hour", ZH: "音频分钟 / 小时"},
		"dash.throughput_hint": {EN: "Throughput over the last %d minutes", One: "Throughput over the last %d minute", ZH: "按最近 %d 分钟的产出计算"},
		"dash.takes_recent":    {EN: "%d takes", One: "%d take", ZH: "%d 条音频"},
		"dash.eta":             {EN: "ETA", ZH: "预计完成"},
		"dash.eta_none":        {EN: "No recent renders", ZH: "近期没有合成"},
		"dash.eta_done":        {EN: "All done", ZH: "已全部完成"},
		"dash.eta_soon":        {EN: "Under a minute", ZH: "不到 1 分钟"},
		"dash.eta_minutes":     {EN: "%d min", ZH: "%d 分钟"},
		"dash.eta_hours":       {EN: "%d h %d min", ZH: "%d 小时 %d 分钟"},
		"dash.failed":          {EN: "Failed", ZH: "失败"},
		"dash.needs_action":    {EN: "Need action", ZH: "需要处理"},
		"dash.by_state":        {EN: "Lines by state", ZH: "按状态统计"},
		"dash.by_character":    {EN: "By character", ZH: "按角色统计"},
		"dash.character":       {EN: "Character", ZH: "角色"},
		"dash.lines":           {EN: "Lines", ZH: "句数"},
		"dash.chart_title":     {EN: "Throughput, last hour", ZH: "最近一小时的产出"},
		"dash.chart_audio":     {EN: "Audio seconds per minute", ZH: "每分钟音频秒数"},
		"dash.chart_lines":     {EN: "Lines per minute", ZH: "每分钟句数"},
		"dash.failures":        {EN: "Failures needing action", ZH: "需要处理的失败"},
		"dash.no_failures":     {EN: "No failed lines.", ZH: "没有失败的句子。"},
		"dash.error":           {EN: "Error", ZH: "错误"},
		"dash.attempts":        {EN: "Attempts", ZH: "尝试次数"},
		"dash.failed_at":       {EN: "Failed at", ZH: "失败时间"},
		"dash.all_failed":      {EN: "All %d failed lines", ZH: "全部 %d 条失败的句子"},
		"dash.failed_page":     {EN: "Retry failed lines", ZH: "重试失败的句子"},
	})
}
