from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("gpus", "0018_view_dra_rows"),
    ]

    operations = [
        migrations.AddField(
            model_name="viewworkspace",
            name="waiting",
            field=models.IntegerField(default=0),
        ),
    ]
