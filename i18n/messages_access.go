package i18n

// Messages of project membership and archived projects.
func init() {
	register(map[string]Message{
		"members.title":         {EN: "Members", ZH: "成员"},
		"members.hint":          {EN: "Editors see and change only the projects they are members of; managers and admins see every project.", ZH: "编辑只能查看和修改自己所属的项目；项目经理和管理员可以查看所有项目。"},
		"members.user":          {EN: "User", ZH: "用户"},
		"members.added":         {EN: "Added", ZH: "加入"},
		"members.added_by":      {EN: "by %s, %s", ZH: "由 %s 于 %s 添加"},
		"members.remove":        {EN: "Remove", ZH: "移除"},
		"members.none":          {EN: "No members yet: only managers and admins see this project.", ZH: "尚无成员：只有项目经理和管理员能看到此项目。"},
		"members.editor":        {EN: "Editor", ZH: "编辑"},
		"members.add":           {EN: "Add member", ZH: "添加成员"},
		"members.no_candidates": {EN: "Every enabled editor is a member.", ZH: "所有已启用的编辑都已是成员。"},
		"members.history":       {EN: "Changes of members", ZH: "成员变更记录"},
		"members.event_add":     {EN: "%s added %s", ZH: "%s 添加了 %s"},
		"members.event_remove":  {EN: "%s removed %s", ZH: "%s 移除了 %s"},
		"members.bad_user":      {EN: "Only an enabled editor can be added as a member.", ZH: "只能添加已启用的编辑为成员。"},

		"project.archived_read_only": {EN: "This project is archived and read-only: a manager can restore it to change it again.", ZH: "此项目已归档，只读：项目经理恢复后才能再修改。"},
	})
}
