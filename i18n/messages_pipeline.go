package i18n

// Messages of the render pipeline: actions, failures and the glossary.
func init() {
	register(map[string]Message{
		"glossary.bad_term":   {EN: "A term is 1 to 100 characters.", ZH: "术语为 1 到 100 个字符。"},
		"glossary.bad_spoken": {EN: "Say how to pronounce it, in at most 200 characters.", ZH: "请填写读法，不超过 200 个字符。"},

		"render.no_reference":   {EN: "%s has no reference voice: upload one on the Characters page.", ZH: "%s 没有参考音色：请在角色页面上传。"},
		"render.no_character":   {EN: "This line has no character: assign one before rendering.", ZH: "这句台词没有角色：请先分配角色再合成。"},
		"render.empty_text":     {EN: "This line has no text to speak.", ZH: "这句台词没有可合成的文本。"},
		"render.internal":       {EN: "The render failed: %s", ZH: "合成失败：%s"},
		"render.no_slot_length": {EN: "This line's slot has no length: fix its timing.", ZH: "这句台词的时间槽长度为零：请修正时间。"},
		"render.too_long":       {EN: "This line is longer than the GPU profile allows (%.0f s): split it.", ZH: "这句台词超过 GPU 配置允许的长度（%.0f 秒）：请拆分。"},

		"render.pending":        {EN: "Render pending lines", ZH: "合成待处理台词"},
		"render.retry_failed":   {EN: "Retry %d failed", ZH: "重试 %d 句失败台词"},
		"render.failed_list":    {EN: "Failed lines", ZH: "失败列表"},
		"render.cancel":         {EN: "Cancel render", ZH: "取消合成"},
		"render.cancel_confirm": {EN: "Cancel every queued and running line of this project?", ZH: "取消此项目所有排队和进行中的台词？"},
		"render.paused":         {EN: "Queue paused by an admin", ZH: "队列已被管理员暂停"},
		"render.queued":         {EN: "Queued %d lines.", ZH: "已加入队列 %d 句。"},
		"render.cancelled":      {EN: "Cancelled %d lines.", ZH: "已取消 %d 句。"},
		"render.details":        {EN: "Details", ZH: "详情"},
		"render.error":          {EN: "Error", ZH: "错误"},
		"render.no_failures":    {EN: "No failed lines.", ZH: "没有失败的台词。"},
		"bulk.render":           {EN: "Render selected", ZH: "合成所选"},

		"line.attempts":   {EN: "%d attempts", ZH: "已尝试 %d 次"},
		"line.takes":      {EN: "Takes", ZH: "录音版本"},
		"line.render":     {EN: "Render", ZH: "合成"},
		"line.regenerate": {EN: "Regenerate", ZH: "重新生成"},

		"take.title":     {EN: "Takes", ZH: "录音版本"},
		"take.none":      {EN: "No takes yet.", ZH: "暂无录音版本。"},
		"take.audio":     {EN: "Audio", ZH: "音频"},
		"take.engine":    {EN: "Engine", ZH: "引擎"},
		"take.device":    {EN: "Device", ZH: "设备"},
		"take.peak_vram": {EN: "Peak VRAM", ZH: "显存峰值"},
		"take.time":      {EN: "Synthesis + fit", ZH: "合成 + 对齐"},
		"take.stretch":   {EN: "Stretch", ZH: "变速"},
		"take.current":   {EN: "Current", ZH: "当前"},
		"take.approved":  {EN: "Approved", ZH: "已通过"},
		"take.approve":   {EN: "Approve", ZH: "通过"},
		"take.use":       {EN: "Use this take", ZH: "使用此版本"},
		"take.play":      {EN: "Play", ZH: "播放"},
		"take.cpu":       {EN: "CPU", ZH: "CPU"},

		"workers.title":   {EN: "Workers and queue", ZH: "工作进程与队列"},
		"workers.name":    {EN: "Worker", ZH: "工作进程"},
		"workers.host":    {EN: "Host", ZH: "主机"},
		"workers.engines": {EN: "Engines", ZH: "引擎"},
		"workers.slots":   {EN: "Slots", ZH: "并发槽"},
		"workers.seen":    {EN: "Last heartbeat", ZH: "最近心跳"},
		"workers.alive":   {EN: "Alive", ZH: "在线"},
		"workers.silent":  {EN: "Silent", ZH: "无响应"},
		"workers.none":    {EN: "No worker has registered.", ZH: "没有已注册的工作进程。"},
		"workers.pause":   {EN: "Pause synthesis", ZH: "暂停合成"},
		"workers.resume":  {EN: "Resume synthesis", ZH: "恢复合成"},
	})
}
