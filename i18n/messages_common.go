package i18n

func init() {
	register(map[string]Message{
		"app.name":          {EN: "dubstudio", ZH: "dubstudio"},
		"error.not_found":   {EN: "Not found.", ZH: "未找到。"},
		"error.forbidden":   {EN: "You do not have permission to do this.", ZH: "你没有执行此操作的权限。"},
		"error.internal":    {EN: "Something went wrong on our side. It has been logged.", ZH: "服务器出错了，已记录。"},
		"error.csrf":        {EN: "This form has expired. Reload the page and try again.", ZH: "表单已过期，请刷新页面后重试。"},
		"error.too_large":   {EN: "The upload is too large: the limit is %d MB.", ZH: "上传文件过大：上限为 %d MB。"},
		"error.bad_request": {EN: "The request could not be understood.", ZH: "无法理解该请求。"},
		"error.conflict":    {EN: "Someone else changed this in the meantime.", ZH: "此内容已被他人修改。"},
		// chart.time labels the time axis in the charts' legends (uPlot's own is English).
		"chart.time": {EN: "Time", ZH: "时间"},
	})
}
