from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("gpus", "0019_view_workspace_waiting"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="viewnode",
            index=models.Index(fields=["name", "digest"], name="gpus_viewnode_name_digest"),
        ),
    ]
